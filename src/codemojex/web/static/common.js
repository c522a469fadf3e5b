// Codemojex: helpers shared by the three pages (Play, Proof, Dashboard).
//
// - api(): fetch JSON from the HTTP API (docs/http-api.md), throwing ApiError on a refusal;
// - the player session in localStorage (cmx.token, cmx.player_id, cmx.name, cmx.token_expires_ms,
//   cmx.token_life_ms) and join(), renewToken() (rotate a token past half its life) and logout();
// - small DOM builders (el, clear) so server text only ever lands in textContent;
// - feedback marks (hit / near / miss → ✓ / ↔ / ✕ on green / yellow / grey), friendly error texts, time formatting.

/** An error answered by the API (or a network failure, status 0, code "network"). */
export class ApiError extends Error {
  constructor(message, { status = 0, code = "network", problem = null, body = null } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.problem = problem;
    this.body = body;
  }
}

/** True when the call's effect is unknown and it may be retried with the same Idempotency-Key. */
export function isRetryable(err) {
  return err instanceof ApiError && (err.status === 0 || err.code === "unavailable");
}

async function readJson(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function errorFrom(response, body) {
  const shape = body && typeof body === "object" && body.error && typeof body.error === "object" ? body.error : null;
  const code = (shape && shape.code) || `http_${response.status}`;
  const message = (shape && shape.message) || response.statusText || `HTTP ${response.status}`;
  const problem = (shape && shape.problem) || (body && body.problem) || null;
  return new ApiError(message, { status: response.status, code, problem, body });
}

/**
 * Call the API: api("POST", "/api/players", {body: {name}}) → the parsed JSON (null when empty).
 * `token` sends `Authorization: Bearer <token>`; `headers` adds more. Throws ApiError.
 */
export async function api(method, path, { body, token, headers, signal } = {}) {
  const init = { method, headers: { Accept: "application/json", ...(headers || {}) }, signal, cache: "no-store" };
  if (token) init.headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (cause) {
    if (cause && cause.name === "AbortError") throw cause;
    throw new ApiError("the server could not be reached", { status: 0, code: "network" });
  }
  const parsed = await readJson(response);
  if (!response.ok) throw errorFrom(response, parsed);
  return parsed;
}

// ---------------------------------------------------------------------------------------------
// The player session

const KEYS = {
  token: "cmx.token",
  player_id: "cmx.player_id",
  name: "cmx.name",
  token_expires_ms: "cmx.token_expires_ms",
  token_life_ms: "cmx.token_life_ms",
};

function storageGet(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function storageSet(key, value) {
  try {
    if (value === null || value === undefined) localStorage.removeItem(key);
    else localStorage.setItem(key, String(value));
  } catch {
    /* private mode: the session lasts as long as the page */
  }
}

/** The stored player session {token, player_id, name, token_expires_ms, token_life_ms}, or null. */
export function getSession() {
  const token = storageGet(KEYS.token);
  if (!token) return null;
  return {
    token,
    player_id: storageGet(KEYS.player_id) || "",
    name: storageGet(KEYS.name) || "",
    token_expires_ms: Number(storageGet(KEYS.token_expires_ms)) || 0,
    token_life_ms: Number(storageGet(KEYS.token_life_ms)) || 0,
  };
}

export function saveSession({ token, player_id, name, token_expires_ms = 0, token_life_ms = 0 }) {
  storageSet(KEYS.token, token);
  storageSet(KEYS.player_id, player_id);
  storageSet(KEYS.name, name);
  storageSet(KEYS.token_expires_ms, token_expires_ms || null);
  storageSet(KEYS.token_life_ms, token_life_ms || null);
}

export function clearSession() {
  Object.values(KEYS).forEach((key) => storageSet(key, null));
}

/**
 * Register a player (POST /api/players) and store the session; returns {session, recovery_code} (the
 * code is shown once and never stored here).
 */
export async function join(name) {
  const player = await api("POST", "/api/players", { body: { name } });
  const session = {
    token: player.token,
    player_id: player.player_id,
    name: player.name,
    token_expires_ms: player.token_expires_ms || 0,
    token_life_ms: player.token_expires_ms ? player.token_expires_ms - player.created_ms : 0,
  };
  saveSession(session);
  return { session, recovery_code: player.recovery_code || null };
}

/**
 * Rotate the session's token (POST /api/me/token) when less than half its life is left, or its end is
 * unknown (a session stored before tokens ended). A lost reply is retried once with the same old
 * token: the server answers the same new token. Returns the (possibly renewed) session; a 401 throws.
 */
export async function renewToken(session) {
  const left = session.token_expires_ms - Date.now();
  if (session.token_expires_ms && session.token_life_ms && left > session.token_life_ms / 2) return session;
  let issued;
  try {
    issued = await api("POST", "/api/me/token", { token: session.token });
  } catch (err) {
    if (!isRetryable(err)) throw err;
    issued = await api("POST", "/api/me/token", { token: session.token });
  }
  const life = session.token_life_ms || Math.max(0, issued.token_expires_ms - Date.now());
  const renewed = { ...session, token: issued.token, token_expires_ms: issued.token_expires_ms, token_life_ms: life };
  saveSession(renewed);
  return renewed;
}

/** Log out: revoke the token on the server (DELETE /api/me/token), then forget the session here. */
export async function logout(session) {
  try {
    if (session) await api("DELETE", "/api/me/token", { token: session.token });
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) throw err; // already gone: nothing to revoke
  }
  clearSession();
}

/** n random lower-case letters (for generated names). */
export function randomLetters(n) {
  const alphabet = "abcdefghijklmnopqrstuvwxyz";
  const bytes = new Uint8Array(n);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("");
}

/** A fresh idempotency key (crypto.randomUUID where available, else random hex). */
export function newIdempotencyKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---------------------------------------------------------------------------------------------
// DOM helpers: build elements with textContent, never innerHTML with server text.

/** Escape text for HTML (for the rare place a string must be HTML). */
export function escapeHtml(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

/**
 * el("td", {class: "num", dataset: {testid: "x"}, title: "t"}, "text", childNode, ...):
 * attributes are set with setAttribute (dataset keys become data-*), children as text nodes or nodes.
 */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "dataset") {
      for (const [key, data] of Object.entries(value)) {
        if (data !== null && data !== undefined) node.dataset[key] = String(data);
      }
    } else if (name === "class") {
      node.className = value;
    } else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) {
      node.setAttribute(name, "");
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Remove every child of node. */
export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

/** Set a node's textContent only when it changed (keeps selections and avoids repaints). */
export function setText(node, text) {
  const value = String(text ?? "");
  if (node && node.textContent !== value) node.textContent = value;
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const byTestId = (id, root = document) => root.querySelector(`[data-testid="${id}"]`);

/** Show a message in a message element; kind is "info" | "ok" | "error". */
export function showMessage(node, text, kind = "info") {
  if (!node) return;
  node.textContent = text || "";
  node.dataset.kind = kind;
  node.hidden = !text;
}

// ---------------------------------------------------------------------------------------------
// Feedback marks

// Each mark has a symbol of its own as well as a colour, so hit, near and miss differ in shape for a
// reader who cannot tell the colours apart (or prints in grayscale), and a name read out in words.
export const MARKS = {
  hit: { symbol: "✓", title: "hit: the right emoji in the right place" },
  near: { symbol: "↔", title: "near: in the code, but elsewhere" },
  miss: { symbol: "✕", title: "miss: not (or no more) in the code" },
};

/** One feedback cell: <span data-testid="mark" class="mark hit" role="img" aria-label="position 1: hit">✓</span>. */
export function markCell(mark, position) {
  const known = MARKS[mark] ? mark : "miss";
  return el("span", {
    class: `mark ${known}`,
    role: "img",
    title: `position ${position + 1} ${MARKS[known].title}`,
    "aria-label": `position ${position + 1}: ${known}`,
    dataset: { testid: "mark", mark: known, position },
  }, MARKS[known].symbol);
}

/** The feedback row of a scored guess: one mark cell per position. */
export function renderMarks(marks) {
  return el("span", { class: "marks", role: "group", "aria-label": "feedback" }, (marks || []).map((mark, i) => markCell(mark, i)));
}

/** "🟩×3 🟨×1" for hits / nears counts. */
export function countsText(hits, nears) {
  return `🟩×${hits ?? 0} 🟨×${nears ?? 0}`;
}

// ---------------------------------------------------------------------------------------------
// Friendly error texts, one per code of the contract

const FRIENDLY = {
  invalid_guess: "That is not six keys of this round's keyboard.",
  invalid_id: "That id is not well formed.",
  invalid_option: "That option is not valid.",
  invalid_name: "Pick a name of 1 to 32 visible characters.",
  invalid_input: "That input is not valid.",
  not_proven: "Only a position one of your scored guesses proved a hit can be locked.",
  unauthorized: "Your session has ended (expired or logged out): join again.",
  name_taken: "That name (or one that looks the same) is taken.",
  insufficient_funds: "You cannot pay for another guess: no tickets or coins left.",
  forbidden: "Not allowed: this needs the operator token (or the proof is off).",
  unknown_round: "That round does not exist.",
  unknown_job: "That job does not exist (or is not yours).",
  unknown_player: "That player does not exist.",
  no_open_round: "No round is open right now. Waiting for the next one…",
  not_found: "Not found.",
  round_closed: "This round is closed: no more guesses.",
  round_not_open: "This round has not opened yet.",
  already_solved: "You already cracked this code!",
  max_guesses: "You have used every guess this round allows.",
  idempotency_conflict: "That retry key was already used for a different guess.",
  body_too_large: "That request is too large.",
  trimmed: "That job is past its retention: only a tombstone is left.",
  malformed_body: "The request was not understood.",
  too_many_queued: "Slow down: you already have the most guesses waiting to be scored.",
  unavailable: "The game store is unreachable; the effect is unknown. Retry: it will not be charged twice.",
  network: "The server could not be reached. Retry: it will not be charged twice.",
};

const PROBLEMS = {
  wrong_length: "a guess is exactly six emoji",
  off_keyboard: "use only the keys on this round's keyboard",
  blank: "fill every position that is not locked",
  whitespace: "no spaces in a guess",
  control: "no control characters in a guess",
  too_long: "that guess is far too long",
  empty: "the guess is empty",
};

// generic codes: the server's own message says more than the friendly text
const WITH_DETAIL = new Set(["invalid_input", "invalid_option", "invalid_id", "malformed_body", "not_found"]);

/** A player-facing text for an error (an ApiError or anything thrown). */
export function friendlyError(err) {
  if (!(err instanceof ApiError)) return `Something went wrong: ${err && err.message ? err.message : err}`;
  const base = FRIENDLY[err.code] || err.message || `Error ${err.status}`;
  if (err.code === "invalid_guess" && err.problem) {
    return `${base} (${PROBLEMS[err.problem] || String(err.problem).replace(/_/g, " ")})`;
  }
  if (err.code === "name_taken" || err.code === "invalid_name") {
    // the server says what is wrong with this name (too long, a look-alike of whose name, ...)
    const text = err.message && !err.message.startsWith("HTTP") ? err.message.replace(/\.$/, "") : "";
    const said = text ? `${text[0].toUpperCase()}${text.slice(1)}.` : base;
    const suggestion = err.body && err.body.error && err.body.error.suggestion;
    return suggestion ? `${said} “${suggestion}” is free (filled in for you).` : said;
  }
  if (WITH_DETAIL.has(err.code) && err.message && err.message !== base) return `${base.replace(/\.$/, "")}: ${err.message}`;
  return base;
}

// ---------------------------------------------------------------------------------------------
// Time formatting

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

/** The short form of a branded id for narrow places: "JOB…X7K2QZ" (the full id goes in title). */
export function shortId(id) {
  const text = String(id || "");
  return text.length > 12 ? `${text.slice(0, 3)}…${text.slice(-6)}` : text;
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
