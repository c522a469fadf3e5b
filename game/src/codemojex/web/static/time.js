// Codemojex · time on every page (common.js re-exports it): clock and duration texts, the server's
// clock estimated from its server_ms readings, and every(), a repeating timer that never overlaps
// itself.

import { ApiError } from "/static/api.js";

const pad = (n) => String(n).padStart(2, "0");

/** "14:03:07" (local time) for an epoch ms. */
export function formatClock(ms) {
  if (ms === null || ms === undefined) return "–";
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** "14:03:07.250" for a log line. */
export function formatClockMs(ms) {
  const d = new Date(ms);
  return `${formatClock(ms)}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

/** A duration: "3.2 s", "4 min 05 s", "2 h 03 min". */
export function formatDuration(ms) {
  const abs = Math.abs(ms);
  if (abs < 60_000) return `${(abs / 1000).toFixed(1)} s`;
  const s = Math.floor(abs / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${pad(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${pad(Math.floor((s % 3600) / 60))} min`;
}

/** "in 3.2 s" / "3.2 s ago" for a target time relative to now (both in ms, the same clock). */
export function formatRelative(targetMs, nowMs) {
  if (targetMs === null || targetMs === undefined) return "–";
  const delta = targetMs - nowMs;
  return delta >= 0 ? `in ${formatDuration(delta)}` : `${formatDuration(delta)} ago`;
}

/** Estimate the server clock from a server_ms reading: server_ms + time elapsed since it was read. */
export function serverClock() {
  let offset = 0;
  return {
    update(serverMs) {
      if (typeof serverMs === "number") offset = serverMs - Date.now();
    },
    now() {
      return Date.now() + offset;
    },
  };
}

/**
 * A repeating timer: every(ms, fn) runs fn, waits ms after it settles, runs it again.
 * Returns {stop(), set(ms), now()}: set re-aims the delay, now() runs fn soon (never two runs at once).
 */
export function every(ms, fn) {
  let delay = ms;
  let handle = null;
  let running = false;
  let stopped = false;
  const schedule = (wait) => {
    clearTimeout(handle);
    if (!stopped && !running) handle = setTimeout(tick, wait);
  };
  const tick = async () => {
    if (stopped || running) return;
    running = true;
    try {
      await fn();
    } catch (err) {
      // an ApiError is the page's to show (and a refused call already is); anything else is a bug
      if (!(err instanceof ApiError)) console.error(err);
    } finally {
      running = false;
    }
    schedule(delay);
  };
  schedule(delay);
  return {
    stop() {
      stopped = true;
      clearTimeout(handle);
    },
    set(next) {
      if (next === delay) return;
      delay = next;
      schedule(delay);
    },
    now() {
      schedule(0);
    },
    get delay() {
      return delay;
    },
  };
}
