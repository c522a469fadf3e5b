// Codemojex · the Play page's live updates: the event stream of the round shown and the live indicator
// (an ES module play.js builds with createLive).
//
// The stream opens with a one-use ticket (POST /api/events/ticket), never the token in the URL. Any
// error closes it (EventSource would retry with the spent ticket) and a new ticket is asked for later,
// waiting longer after each failure (2 s up to 60 s) and polling meanwhile (play.js's round timers poll
// while the indicator is not "live"). A "revoked" event (the stream's token was rotated or logged out)
// is followed by a new ticket only while our token works. The indicator says live, polling, offline or
// "server unreachable" (the last call could not reach the server, whatever the stream).

import { ApiError, setText } from "/static/common.js";
import { showSolveNotice } from "/static/notices.js";

function parseEvent(event) {
  try {
    return JSON.parse(event.data);
  } catch {
    return null;
  }
}

/**
 * The stream and the indicator over ``state`` and ``ui``; the callbacks reload or draw what an event
 * announces: refreshGuesses, refreshWallet, refreshBoard (promises), renderBoard(entries),
 * showWinners(summary) and checkRound() (promises).
 */
export function createLive({ state, ui, call, refreshGuesses, refreshWallet, refreshBoard, renderBoard, showWinners, checkRound }) {
  let eventsDelay = 2000;
  let eventsGeneration = 0;

  async function open() {
    close();
    if (!("EventSource" in window) || !state.round || !state.session) {
      setLive("polling");
      return;
    }
    const generation = ++eventsGeneration;
    const roundId = state.round.round_id;
    let ticket;
    try {
      ticket = await call("POST", "/api/events/ticket", { body: { round_id: roundId } });
    } catch {
      if (generation === eventsGeneration) retry();
      return;
    }
    if (generation !== eventsGeneration || !state.round || state.round.round_id !== roundId) return;
    const source = new EventSource(`/api/events?${new URLSearchParams({ ticket: ticket.ticket })}`);
    state.events = source;
    source.addEventListener("open", () => setLive("live"));
    source.addEventListener("hello", () => {
      eventsDelay = 2000;
      setLive("live");
    });
    source.addEventListener("scored", onScoredEvent);
    source.addEventListener("leaderboard", onBoardEvent);
    source.addEventListener("solved", (event) => {
      const data = parseEvent(event);
      if (!data || !state.round || data.round_id !== state.round.round_id) return;
      showSolveNotice(ui.notices, data, state.session && state.session.player_id);
    });
    source.addEventListener("resync", () => {
      refreshGuesses().catch(() => {});
      refreshBoard().catch(() => {});
    });
    source.addEventListener("closed", (event) => {
      const data = parseEvent(event);
      if (data && data.winners) showWinners(data).catch(() => {});
      checkRound().catch(() => {});
    });
    // The token the stream was opened with no longer names us (a logout elsewhere, a rotation): a new
    // ticket only if our token still works (this page rotated it), else call() shows the join form (401).
    source.addEventListener("revoked", () => {
      if (state.events !== source) return;
      source.close();
      state.events = null;
      setLive("polling");
      call("GET", "/api/me").then(
        () => {
          if (generation === eventsGeneration && !state.events) open();
        },
        (err) => {
          if (!(err instanceof ApiError && err.status === 401)) retry();
        },
      );
    });
    source.addEventListener("error", () => {
      if (state.events !== source) return;
      source.close();
      state.events = null;
      retry();
    });
  }

  function retry() {
    setLive("polling");
    const generation = eventsGeneration;
    setTimeout(() => {
      if (generation === eventsGeneration && !state.events && state.round && state.session) open();
    }, eventsDelay);
    eventsDelay = Math.min(eventsDelay * 2, 60000);
  }

  function close() {
    eventsGeneration += 1;
    if (state.events) state.events.close();
    state.events = null;
    setLive("off");
  }

  function setLive(live) {
    state.live = live;
    renderLive();
  }

  /** A call reached the server (true) or failed to (false: the indicator says so, whatever the stream). */
  function setReachable(reachable) {
    if (state.unreachable === !reachable) return;
    state.unreachable = !reachable;
    renderLive();
  }

  function renderLive() {
    const live = state.unreachable ? "unreachable" : state.live;
    ui.live.dataset.live = live;
    const text = { live: "live", polling: "polling", off: "offline", unreachable: "server unreachable" }[live] || live;
    setText(ui.live.querySelector(".live-text"), text);
    ui.live.title = {
      live: "Live updates over server-sent events",
      unreachable: "The server cannot be reached: retrying",
    }[live] || "Live updates unavailable: polling";
  }

  function onScoredEvent(event) {
    const data = parseEvent(event);
    if (data && state.round && data.round_id && data.round_id !== state.round.round_id) return;
    refreshGuesses().catch(() => {});
    refreshWallet().catch(() => {});
    refreshBoard().catch(() => {});
  }

  function onBoardEvent(event) {
    const data = parseEvent(event);
    if (!data || !state.round || (data.round_id && data.round_id !== state.round.round_id)) return;
    renderBoard(data.entries || []);
  }

  return { open, close, setReachable };
}
