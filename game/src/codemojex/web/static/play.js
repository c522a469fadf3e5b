// Codemojex · Play page: the state, the player's calls, the data refreshes, boot and wiring.
//
// Join as a player (or reuse the stored session), load the open round, and build a guess of six emoji
// with the mouse or the keyboard; locked positions are filled in by the server (sent as null). Submit
// with a fresh Idempotency-Key per guess (the same key when a guess is retried after a network error).
// The player's guesses, wallet and the leaderboard stay live through /api/events (SSE) with polling as
// the fallback. A 401 anywhere (an expired, rotated or revoked token) forgets the session and shows the
// join form again, the old name filled in. The token is rotated on start when past half its life.
//
// The page is built from role-named ES modules, each given the shared state (play_state.js) and the
// page's elements (ui) and callbacks by this one; none imports another's factory, so imports go one way:
// session.js (join form, log out, new recovery code), round.js (the round shown, its header, timers and
// close), board.js (slots, on-screen keyboard, cursor, locks, keys typed), submit.js (sending a guess,
// announcing its score), live.js (the event stream and the live indicator), views.js (guesses,
// leaderboard, wallet). Play aids live in their own modules: lobby.js (the open rounds, the winners),
// marks.js (keys proved in/out), share.js (the share grid), notices.js (solve notices from the stream's
// `solved` events), stats.js (GET /api/me/stats), economy.js (the price of the next guess), accounts.js
// (the recovery code, the sign-out warning).

import {
  api, ApiError, getSession, clearSession, renewToken, byTestId, showMessage, friendlyError, serverClock,
} from "/static/common.js";
import { createLobby } from "/static/lobby.js";
import { markKeys } from "/static/marks.js";
import { renderShare, wireShare } from "/static/share.js";
import { refreshStats } from "/static/stats.js";
import { initAccounts } from "/static/accounts.js";
import { PENDING, newState, roundPath, isSolved } from "/static/play_state.js";
import { renderGuesses, renderBoard, renderWallet } from "/static/views.js";
import { createBoard } from "/static/board.js";
import { createSubmit } from "/static/submit.js";
import { createLive } from "/static/live.js";
import { createRound } from "/static/round.js";
import { createSession } from "/static/session.js";

const ui = {
  message: byTestId("message"),
  joinForm: byTestId("join-form"),
  form: document.getElementById("join-form"),
  name: byTestId("name"),
  joinButton: byTestId("join"),
  game: byTestId("game"),
  playerName: byTestId("player-name"),
  leave: byTestId("leave"),
  newRecovery: byTestId("new-recovery"),
  keyCount: byTestId("key-count"),
  balances: document.getElementById("balances"),
  price: byTestId("price"),
  economy: byTestId("economy"),
  roundId: byTestId("round-id"),
  roundStatus: byTestId("round-status"),
  roundTimer: byTestId("round-timer"),
  live: byTestId("live"),
  solved: byTestId("solved"),
  closed: byTestId("round-closed"),
  secret: byTestId("secret"),
  nextRound: byTestId("next-round"),
  lobby: byTestId("lobby"),
  nextOpens: byTestId("next-opens"),
  winners: byTestId("winners"),
  panel: byTestId("board-panel"),
  slots: document.getElementById("slots"),
  keyboard: byTestId("keyboard"),
  submit: byTestId("submit"),
  clearButton: byTestId("clear"),
  prefill: byTestId("prefill"),
  notices: byTestId("notices"),
  share: byTestId("share"),
  stats: byTestId("stats"),
  guesses: byTestId("guesses"),
  guessCount: document.getElementById("guess-count"),
  noGuesses: document.getElementById("no-guesses"),
  boardBody: document.getElementById("board-body"),
};

const state = newState();
const playerId = () => state.session && state.session.player_id;

// The parts call one another only through the callbacks given here (arrows: a part built later is
// looked up when the callback runs, not when it is given).
const clock = serverClock();
const lobby = createLobby({
  list: ui.lobby, next: ui.nextOpens, clock, call: (...args) => call(...args), onPick: (round) => rounds.setRound(round),
});
const board = createBoard({
  state, ui, call: (...args) => call(...args), submit: () => sender.submit(), refreshGuesses: () => refreshGuesses(),
});
const sender = createSubmit({
  state, ui, call: (...args) => call(...args), board, refreshWallet: () => refreshWallet(),
  refreshGuesses: () => refreshGuesses(), checkRound: () => rounds.checkRound(),
});
const live = createLive({
  state, ui, call: (...args) => call(...args),
  refreshGuesses: () => refreshGuesses(), refreshWallet: () => refreshWallet(), refreshBoard: () => refreshBoard(),
  renderBoard: (entries) => renderBoard(ui.boardBody, entries, playerId()),
  showWinners: (summary) => rounds.showWinners(summary), checkRound: () => rounds.checkRound(),
});
const rounds = createRound({
  state, ui, clock, lobby, call: (...args) => call(...args), board, live,
  refreshGuesses: () => refreshGuesses(), refreshBoard: () => refreshBoard(), refreshWallet: () => refreshWallet(),
});
const session = createSession({ state, ui, stopRound: () => rounds.stopRound(), startGame: () => startGame() });

// ---------------------------------------------------------------------------------------------
// Calls

/** A player call: the stored token; a 401 forgets the session and shows the join form. */
async function call(method, path, options = {}) {
  if (!state.session) throw new ApiError("not joined", { status: 401, code: "unauthorized" });
  try {
    const answer = await api(method, path, { ...options, token: state.session.token });
    live.setReachable(true);
    return answer;
  } catch (err) {
    live.setReachable(!(err instanceof ApiError && err.status === 0));
    if (err instanceof ApiError && err.status === 401) {
      const name = state.session ? state.session.name : "";
      clearSession();
      session.showJoin(friendlyError(err));
      if (name && !ui.name.value) ui.name.value = name;
    }
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Start

async function startGame() {
  ui.joinForm.hidden = true;
  ui.game.hidden = false;
  ui.playerName.textContent = state.session.name || state.session.player_id;
  try {
    state.session = await renewToken(state.session);
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      const name = state.session.name;
      clearSession();
      session.showJoin(friendlyError(err));
      ui.name.value = name || "";
      return;
    }
    // the server could not be reached: keep the token, the calls below say what is wrong
  }
  try {
    const me = await call("GET", "/api/me"); // a stale token answers 401: back to the join form
    state.session.name = me.name || state.session.name;
    ui.playerName.textContent = state.session.name;
  } catch (err) {
    if (!state.session) return;
    showMessage(ui.message, friendlyError(err), "error");
  }
  refreshWallet().catch(() => {});
  refreshStats(call, ui.stats).catch(() => {});
  rounds.loadRound();
}

// ---------------------------------------------------------------------------------------------
// Data refreshes

async function refreshWallet() {
  const query = state.round ? `?round_id=${encodeURIComponent(state.round.round_id)}` : "";
  state.wallet = await call("GET", `/api/wallet${query}`);
  renderWallet(ui, state.wallet, state.round);
  board.renderInputEnabled();
}

async function refreshGuesses() {
  if (!state.round) return;
  const roundId = state.round.round_id;
  const data = await call("GET", roundPath(state, "/guesses"));
  if (!state.round || state.round.round_id !== roundId) return;
  const wasPending = state.guesses.filter((g) => PENDING.has(g.state)).length;
  const wasScored = state.guesses.filter((g) => g.feedback).length;
  state.guesses = data.guesses || [];
  state.locks = data.locks || {};
  state.proven = data.proven || {};
  state.keys = data.keys || {};
  state.share = data.share || null;
  markKeys(ui.keyboard, state.keys);
  renderShare(ui.share, state.share, { roundId, solved: isSolved(state) });
  const nowPending = state.guesses.filter((g) => PENDING.has(g.state)).length;
  board.normalizeCursor();
  renderGuesses(ui, state.guesses);
  board.renderSlots();
  board.renderInputEnabled();
  if (nowPending < wasPending) refreshBoard().catch(() => {});
  if (state.guesses.filter((g) => g.feedback).length > wasScored) refreshStats(call, ui.stats).catch(() => {});
  sender.reportScored();
}

async function refreshBoard() {
  if (!state.round) return;
  const data = await call("GET", roundPath(state, "/leaderboard?limit=50"));
  renderBoard(ui.boardBody, data.entries || [], playerId());
}

// ---------------------------------------------------------------------------------------------
// Boot

function boot() {
  session.wire();
  board.wire();
  ui.submit.addEventListener("click", () => sender.submit());
  wireShare(ui.share);
  ui.nextRound.addEventListener("click", () => rounds.onNextRound());
  initAccounts({
    onSignedIn: (signedIn) => {
      state.session = signedIn;
      startGame();
    },
  });
  document.addEventListener("keydown", board.onKeydown);
  window.addEventListener("pagehide", () => live.close());
  state.session = getSession();
  if (state.session) startGame();
  else session.showJoin("");
}

boot();
