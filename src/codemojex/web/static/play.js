// Codemojex · Play page.
//
// Join as a player (or reuse the stored session), load the open round, and build a guess of six emoji
// with the mouse or the keyboard; locked positions are filled in by the server (sent as null). Submit
// with a fresh Idempotency-Key per guess (the same key when a guess is retried after a network error).
// The player's guesses, wallet and the leaderboard stay live through /api/events (SSE) with polling as
// the fallback. A 401 anywhere (an expired, rotated or revoked token) forgets the session and shows the
// join form again, the old name filled in. The token is rotated on start when past half its life;
// "Log out" warns first (accounts.js: the recovery code, the join screen's recovery sign-in), then
// revokes the token on the server before forgetting it here.
// Play aids live in their own modules: marks.js (keys proved in/out), share.js (the share grid),
// notices.js (solve notices from the stream's `solved` events), stats.js (GET /api/me/stats); "↺ Last
// guess" (or R) fills the slots with the newest guess to edit (prefillLast).

import {
  api, ApiError, isRetryable, getSession, clearSession, join, renewToken, logout, newIdempotencyKey,
  el, clear, setText, byTestId, showMessage, renderMarks, friendlyError,
  formatClock, formatDuration, serverClock, every,
} from "/static/common.js";
import { createLobby, renderWinners, fetchSummary, roundInUrl, keepRoundInUrl } from "/static/lobby.js";
import { markKeys } from "/static/marks.js";
import { renderShare, wireShare } from "/static/share.js";
import { showSolveNotice, clearNotices } from "/static/notices.js";
import { refreshStats } from "/static/stats.js";
import {
  initAccounts, showRecoveryCode, hideRecoveryCode, confirmSignOut, newRecoveryCode,
} from "/static/accounts.js";
import * as economy from "/static/economy.js";

const LENGTH = 6;
const CURRENCY_ICONS = { ticket: "🎟️", coin: "🪙" };
const PENDING = new Set(["queued", "delayed", "active"]);

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

const state = {
  session: null,
  round: null,
  nextRound: null,
  slots: Array(LENGTH).fill(null),
  cursor: 0,
  locks: {},
  proven: {},
  keys: {}, // key -> "in" | "out", what the player's scored guesses prove (marks.js)
  share: null, // the share grid's text (share.js)
  guesses: [],
  wallet: null,
  retry: null, // {fingerprint, key}: the Idempotency-Key of a guess whose effect is unknown
  waiting: null, // the job just submitted, whose score the message will announce
  submitting: false,
  events: null,
  live: "off",
  timers: [],
  roundRetry: null,
  unreachable: false, // the last call could not reach the server
};

const clock = serverClock();
const lobby = createLobby({
  list: ui.lobby, next: ui.nextOpens, clock, call: (...args) => call(...args), onPick: (round) => setRound(round),
});

// ---------------------------------------------------------------------------------------------
// Calls

/** A player call: the stored token; a 401 forgets the session and shows the join form. */
async function call(method, path, options = {}) {
  if (!state.session) throw new ApiError("not joined", { status: 401, code: "unauthorized" });
  try {
    const answer = await api(method, path, { ...options, token: state.session.token });
    setReachable(true);
    return answer;
  } catch (err) {
    setReachable(!(err instanceof ApiError && err.status === 0));
    if (err instanceof ApiError && err.status === 401) {
      const name = state.session ? state.session.name : "";
      clearSession();
      showJoin(friendlyError(err));
      if (name && !ui.name.value) ui.name.value = name;
    }
    throw err;
  }
}

const roundPath = (suffix = "") => `/api/rounds/${encodeURIComponent(state.round.round_id)}${suffix}`;

// ---------------------------------------------------------------------------------------------
// Session: join form and start

function showJoin(text) {
  stopRound();
  state.session = null;
  state.round = null;
  ui.game.hidden = true;
  ui.joinForm.hidden = false;
  showMessage(ui.message, text || "", text ? "warn" : "info");
  ui.name.focus();
}

async function onJoin(event) {
  event.preventDefault();
  const name = ui.name.value.trim();
  if (!name) {
    showMessage(ui.message, "Type a name first.", "error");
    return;
  }
  ui.joinButton.disabled = true;
  try {
    const joined = await join(name);
    state.session = joined.session;
    showMessage(ui.message, "");
    showRecoveryCode(joined.recovery_code);
    startGame();
  } catch (err) {
    const suggestion = err instanceof ApiError && err.body && err.body.error ? err.body.error.suggestion : null;
    if (err instanceof ApiError && err.code === "name_taken" && suggestion) ui.name.value = suggestion;
    showMessage(ui.message, friendlyError(err), "error");
  } finally {
    ui.joinButton.disabled = false;
  }
}

async function onLeave() {
  if (!(await confirmSignOut(state.session))) return;
  ui.leave.disabled = true;
  try {
    await logout(state.session);
    hideRecoveryCode();
    showJoin("Logged out: this player's token no longer works anywhere.");
  } catch (err) {
    showMessage(ui.message, friendlyError(err), "error");
  } finally {
    ui.leave.disabled = false;
  }
}

async function onNewRecovery() {
  if (!window.confirm("Make a new recovery code? The one you have now stops working.")) return;
  try {
    showRecoveryCode(await newRecoveryCode(state.session));
  } catch (err) {
    showMessage(ui.message, friendlyError(err), "error");
  }
}

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
      showJoin(friendlyError(err));
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
  loadRound();
}

// ---------------------------------------------------------------------------------------------
// The round

async function loadRound() {
  clearTimeout(state.roundRetry);
  try {
    await lobby.refresh();
    const round = lobby.pick(roundInUrl());
    if (round) {
      setRound(round);
      return;
    }
    showNoRound();
  } catch (err) {
    if (!state.session) return;
    showMessage(ui.message, friendlyError(err), "error");
  }
  state.roundRetry = setTimeout(loadRound, 3000);
}

function showNoRound() {
  stopRound();
  state.round = null;
  ui.panel.hidden = true;
  ui.closed.hidden = true;
  ui.solved.hidden = true;
  setText(ui.roundId, "–");
  setText(ui.roundStatus, "none");
  ui.roundStatus.dataset.state = "none";
  setText(ui.roundTimer, "");
  clear(ui.guesses);
  ui.noGuesses.hidden = false;
  renderBoard([]);
  showMessage(ui.message, friendlyError(new ApiError("", { code: "no_open_round", status: 404 })), "info");
}

function setRound(round) {
  if (!state.session) return;
  const same = state.round && state.round.round_id === round.round_id;
  clock.update(round.server_ms);
  state.round = round;
  if (!same) {
    stopRound();
    keepRoundInUrl(round.round_id);
    lobby.setCurrent(round.round_id);
    renderWinners(ui.winners, null);
    state.nextRound = null;
    state.slots = Array(LENGTH).fill(null);
    state.cursor = 0;
    state.guesses = [];
    state.locks = {};
    state.proven = {};
    state.keys = {};
    state.share = null;
    clearNotices(ui.notices);
    state.retry = null;
    showMessage(ui.message, "");
    renderKeyboard();
    startRoundTimers();
    openEvents();
    refreshGuesses().catch(() => {});
    refreshBoard().catch(() => {});
    refreshWallet().catch(() => {}); // the offer of this round (economy.js)
  }
  renderRound();
  renderSlots();
  renderWallet();
}

function isClosed() {
  return Boolean(state.round && (state.round.status === "closed" || state.round.secret));
}

function isSolved() {
  return state.guesses.some((g) => g.feedback && g.feedback.solved);
}

function renderRound() {
  const round = state.round;
  ui.panel.hidden = !round;
  if (!round) return;
  setText(ui.roundId, round.round_id);
  setText(ui.roundStatus, round.status);
  ui.roundStatus.dataset.state = round.status;
  const closed = isClosed();
  ui.closed.hidden = !closed;
  if (closed) {
    setText(ui.secret, Array.isArray(round.secret) ? round.secret.join(" ") : String(round.secret || "?"));
    ui.nextRound.hidden = !state.nextRound;
    if (ui.winners.dataset.round !== round.round_id) showWinners().catch(() => {});
  }
  renderTimer();
  renderInputEnabled();
}

function renderTimer() {
  const round = state.round;
  if (!round) return;
  const now = clock.now();
  let text = "";
  if (isClosed()) text = round.closed_ms ? `closed at ${formatClock(round.closed_ms)}` : "closed";
  else if (round.opens_ms && round.opens_ms > now) text = `opens in ${formatDuration(round.opens_ms - now)}`;
  else if (round.closes_ms) text = round.closes_ms > now ? `closes in ${formatDuration(round.closes_ms - now)}` : "closing…";
  else text = "no time limit";
  if (round.max_guesses) text += ` · at most ${round.max_guesses} guesses`;
  setText(ui.roundTimer, text);
}

/** The lobby again; while the round is closed, the newest open round is offered with a button. */
async function checkRound() {
  if (!state.round) return;
  await lobby.refresh();
  if (!isClosed()) {
    const round = await call("GET", roundPath());
    if (round.status !== state.round.status || round.secret) setRound(round);
    return;
  }
  const next = lobby.state.rounds.find((r) => r.round_id !== state.round.round_id);
  if (next) {
    state.nextRound = next;
    ui.nextRound.hidden = false;
  }
}

/** The closed round's winners, from the history once the worker has concluded it. */
async function showWinners(summary = null) {
  const roundId = state.round && state.round.round_id;
  const found = summary || (roundId ? await fetchSummary(call, roundId) : null);
  if (!found || !state.round || found.round_id !== state.round.round_id) return;
  renderWinners(ui.winners, found, state.session && state.session.player_id);
}

function onNextRound() {
  if (state.nextRound) setRound(state.nextRound);
}

// ---------------------------------------------------------------------------------------------
// Timers and live events

function startRoundTimers() {
  state.timers.push(
    every(2000, async () => {
      if (state.guesses.some((g) => PENDING.has(g.state))) await refreshGuesses();
    }),
    every(5000, async () => {
      if (state.live !== "live") await refreshBoard();
    }),
    every(3000, checkRound),
    every(1000, () => {
      renderTimer();
      lobby.tick();
    }),
  );
}

function stopRound() {
  state.timers.forEach((timer) => timer.stop());
  state.timers = [];
  closeEvents();
}

// The stream opens with a one-use ticket (POST /api/events/ticket), never the token in the URL. Any
// error closes it (EventSource would retry with the spent ticket) and a new ticket is asked for later,
// waiting longer after each failure (2 s up to 60 s) and polling meanwhile. A "revoked" event (the
// stream's token was rotated or logged out) is followed by a new ticket only while our token works.
let eventsDelay = 2000;
let eventsGeneration = 0;

async function openEvents() {
  closeEvents();
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
    if (generation === eventsGeneration) retryEvents();
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
        if (generation === eventsGeneration && !state.events) openEvents();
      },
      (err) => {
        if (!(err instanceof ApiError && err.status === 401)) retryEvents();
      },
    );
  });
  source.addEventListener("error", () => {
    if (state.events !== source) return;
    source.close();
    state.events = null;
    retryEvents();
  });
}

function retryEvents() {
  setLive("polling");
  const generation = eventsGeneration;
  setTimeout(() => {
    if (generation === eventsGeneration && !state.events && state.round && state.session) openEvents();
  }, eventsDelay);
  eventsDelay = Math.min(eventsDelay * 2, 60000);
}

function closeEvents() {
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

function parseEvent(event) {
  try {
    return JSON.parse(event.data);
  } catch {
    return null;
  }
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

// ---------------------------------------------------------------------------------------------
// Data refreshes

async function refreshWallet() {
  const query = state.round ? `?round_id=${encodeURIComponent(state.round.round_id)}` : "";
  state.wallet = await call("GET", `/api/wallet${query}`);
  renderWallet();
  renderInputEnabled();
}

async function refreshGuesses() {
  if (!state.round) return;
  const roundId = state.round.round_id;
  const data = await call("GET", roundPath("/guesses"));
  if (!state.round || state.round.round_id !== roundId) return;
  const wasPending = state.guesses.filter((g) => PENDING.has(g.state)).length;
  const wasScored = state.guesses.filter((g) => g.feedback).length;
  state.guesses = data.guesses || [];
  state.locks = data.locks || {};
  state.proven = data.proven || {};
  state.keys = data.keys || {};
  state.share = data.share || null;
  markKeys(ui.keyboard, state.keys);
  renderShare(ui.share, state.share, { roundId, solved: isSolved() });
  const nowPending = state.guesses.filter((g) => PENDING.has(g.state)).length;
  normalizeCursor();
  renderGuesses();
  renderSlots();
  renderInputEnabled();
  if (nowPending < wasPending) refreshBoard().catch(() => {});
  if (state.guesses.filter((g) => g.feedback).length > wasScored) refreshStats(call, ui.stats).catch(() => {});
  reportScored();
}

/** Once the guess just submitted is scored, add its score to the message (keeping the admission text). */
function reportScored() {
  const g = state.waiting && state.guesses.find((x) => x.job_id === state.waiting.job);
  if (!g || PENDING.has(g.state)) return;
  const admitted = state.waiting.text;
  state.waiting = null;
  if (ui.message.textContent !== admitted) return; // another message came since: leave it
  if (g.state === "dead") {
    showMessage(ui.message, `${admitted} It could not be scored: it was dead-lettered (an operator can retry it).`, "error");
    return;
  }
  const f = g.feedback || {};
  const score = f.solved ? "Cracked it! 🎉" : `Scored: ${f.hits} hit${f.hits === 1 ? "" : "s"}, ${f.nears} near${f.nears === 1 ? "" : "s"}.`;
  showMessage(ui.message, `${admitted.replace(/ Waiting for the score…$/, "")} ${score}`, "ok");
}

async function refreshBoard() {
  if (!state.round) return;
  const data = await call("GET", roundPath("/leaderboard?limit=50"));
  renderBoard(data.entries || []);
}

// ---------------------------------------------------------------------------------------------
// Wallet

const plural = (amount, currency) => `${amount} ${currency}${amount === 1 ? "" : "s"}`;

/** Whether the next guess can be paid (the server's offer; true while it is not known yet). */
const canPay = () => economy.nextPrice(state.wallet, state.round) !== null;

function renderWallet() {
  const balances = (state.wallet && state.wallet.balances) || {};
  const order = [...new Set([...((state.round && state.round.prices) || []).map((p) => p.currency), ...Object.keys(balances)])];
  clear(ui.balances);
  for (const currency of order) {
    ui.balances.append(el("span", { class: "balance-item", title: currency },
      el("span", { class: "emoji", "aria-hidden": "true" }, CURRENCY_ICONS[currency] || "💰"),
      el("span", { dataset: { testid: "balance", currency } }, balances[currency] ?? 0),
      el("span", { class: "muted small" }, currency)));
  }
  const shown = economy.describe(state.wallet, state.round, formatClock);
  const price = economy.nextPrice(state.wallet, state.round);
  setText(ui.price, shown.price);
  setText(ui.economy, shown.rule);
  ui.economy.dataset.broke = shown.broke ? "1" : "0";
  ui.price.dataset.currency = price ? price.currency : "";
  ui.price.dataset.amount = price ? price.amount : "";
}

// ---------------------------------------------------------------------------------------------
// Slots, cursor and keys

const isLocked = (i) => Object.prototype.hasOwnProperty.call(state.locks, String(i));
const unlockedPositions = () => [...Array(LENGTH).keys()].filter((i) => !isLocked(i));

/** Keep the cursor on an unlocked slot (or at LENGTH, past the end). */
function normalizeCursor() {
  if (state.cursor < LENGTH && isLocked(state.cursor)) {
    const next = unlockedPositions().find((i) => i > state.cursor);
    state.cursor = next === undefined ? LENGTH : next;
  }
  for (const i of Object.keys(state.locks)) state.slots[Number(i)] = null;
}

function nextUnlocked(from) {
  const next = unlockedPositions().find((i) => i > from);
  return next === undefined ? LENGTH : next;
}

function prevUnlocked(from) {
  const prev = unlockedPositions().filter((i) => i < from).pop();
  return prev === undefined ? -1 : prev;
}

function firstUnlocked() {
  const first = unlockedPositions()[0];
  return first === undefined ? LENGTH : first;
}

function canType() {
  return Boolean(state.round) && !isClosed() && !isSolved() && !state.submitting;
}

function pickKey(key) {
  if (!canType()) return;
  if (state.cursor >= LENGTH) {
    showMessage(ui.message, "All six are filled: press Ctrl+Enter or Submit (Backspace to change).", "info");
    return;
  }
  state.slots[state.cursor] = key;
  state.cursor = nextUnlocked(state.cursor);
  renderSlots();
}

/** Backspace: clear the unlocked slot before the cursor and move the cursor there. */
function backspace() {
  const prev = prevUnlocked(state.cursor);
  if (prev < 0) return;
  state.slots[prev] = null;
  state.cursor = prev;
  renderSlots();
}

function deleteHere() {
  if (state.cursor < LENGTH) state.slots[state.cursor] = null;
  renderSlots();
}

function moveCursor(step) {
  const target = step < 0 ? prevUnlocked(state.cursor) : nextUnlocked(state.cursor);
  if (target < 0) return;
  state.cursor = target;
  renderSlots();
}

function clearSlots() {
  state.slots = Array(LENGTH).fill(null);
  state.cursor = firstUnlocked();
  renderSlots();
}

/** The newest admitted guess of six keys, or null. */
function lastGuess() {
  const last = [...state.guesses].reverse().find((g) => Array.isArray(g.guess) && g.guess.length === LENGTH);
  return last ? last.guess : null;
}

/** Fill the unlocked slots with the last guess, to edit it (locked positions stay the server's). */
function prefillLast() {
  const last = lastGuess();
  if (!canType() || !last) return;
  for (let i = 0; i < LENGTH; i += 1) state.slots[i] = isLocked(i) ? null : last[i];
  state.cursor = LENGTH;
  renderSlots();
}

function onSlotClick(event) {
  const slot = event.target.closest('[data-testid="slot"]');
  if (!slot || !canType()) return;
  const i = Number(slot.dataset.position);
  if (isLocked(i)) return;
  state.cursor = i;
  renderSlots();
}

function onKeyClick(event) {
  const key = event.target.closest('[data-testid="key"]');
  if (key) pickKey(key.dataset.key);
}

// Enter submits while no control has the focus; on a focused control (an on-screen key, a slot, a
// button: reached with Tab) Enter and Space do what that control does, so a key types itself. Ctrl+Enter
// (or ⌘+Enter) submits wherever the focus is. A mouse click on a key or slot leaves the focus where it
// was (onBoardMousedown), so Enter after clicking six keys still submits.
function onKeydown(event) {
  if (ui.game.hidden || !state.round) return;
  if (document.querySelector("dialog[open]")) return; // the sign-out warning has the keyboard
  if (event.key === "Enter" && event.target.closest?.('[data-testid="recovery-panel"]')) return;
  const tag = event.target && event.target.tagName;
  if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.altKey) {
    event.preventDefault();
    submit();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const onControl = event.target instanceof Element && event.target.closest("button, a[href], [tabindex]");
  if ((event.key === "Enter" || event.key === " ") && onControl) return;
  const actions = {
    Backspace: backspace,
    Delete: deleteHere,
    ArrowLeft: () => moveCursor(-1),
    ArrowRight: () => moveCursor(1),
    Escape: () => canType() && clearSlots(),
    Enter: submit,
    r: prefillLast,
    R: prefillLast,
  };
  if (/^[1-9]$/.test(event.key)) {
    const key = (state.round.keyboard || [])[Number(event.key) - 1];
    if (key) pickKey(key);
    event.preventDefault();
  } else if (actions[event.key]) {
    event.preventDefault();
    if (event.key === "Enter" || canType()) actions[event.key]();
  }
}

function renderKeyboard() {
  clear(ui.keyboard);
  setText(ui.keyCount, String(Math.min(9, (state.round.keyboard || []).length)));
  (state.round.keyboard || []).forEach((key, i) => {
    ui.keyboard.append(el("button", {
      type: "button", class: "key", title: `${key} (key ${i + 1})`, "aria-label": `key ${i + 1}: ${key}`,
      dataset: { testid: "key", key, index: i + 1 },
    }, el("span", { class: "hint", "aria-hidden": "true" }, i + 1), key));
  });
}

function slotColumn(i) {
  const locked = isLocked(i);
  const key = locked ? state.locks[String(i)] : state.slots[i];
  const active = !locked && i === state.cursor && canType();
  const slot = el("button", {
    type: "button",
    class: `slot${active ? " active" : ""}`,
    "aria-label": `position ${i + 1}: ${key || "empty"}${locked ? " (locked)" : ""}`,
    "aria-current": active ? "true" : null,
    "aria-disabled": locked ? "true" : null,
    dataset: { testid: "slot", position: i, filled: key ? 1 : 0, locked: locked ? 1 : 0, active: active ? 1 : 0 },
  },
  el("span", { class: "pos", "aria-hidden": "true" }, i + 1),
  key || "",
  locked ? el("span", { class: "lock", "aria-hidden": "true" }, "🔒") : null);
  return el("div", { class: "slot-col" }, slot, lockToggle(i, locked));
}

function lockToggle(i, locked) {
  const proven = state.proven[String(i)];
  if (!locked && !proven) return el("span", { class: "lock-spacer", "aria-hidden": "true" });
  const label = locked ? `Unlock position ${i + 1}` : `Lock position ${i + 1} to ${proven} (a proven hit)`;
  return el("button", {
    type: "button", class: "lock-toggle", title: label, "aria-label": label, disabled: canType() ? null : true,
    dataset: { testid: "lock-toggle", position: i, locked: locked ? 1 : 0 },
  }, locked ? "🔒" : "🔓", el("span", { class: "wide-only" }, locked ? " unlock" : " lock"));
}

/** Redraw the slots; a slot or lock toggle that had the focus (reached with Tab) keeps it. */
function renderSlots() {
  const focused = ui.slots.contains(document.activeElement) ? document.activeElement.dataset : null;
  clear(ui.slots);
  for (let i = 0; i < LENGTH; i += 1) ui.slots.append(slotColumn(i));
  renderInputEnabled();
  if (focused && focused.testid) {
    const again = ui.slots.querySelector(`[data-testid="${focused.testid}"][data-position="${focused.position}"]`);
    if (again && !again.disabled) again.focus();
  }
}

/** A mouse press on a key or slot does not take the focus (Enter then still submits); Tab does. */
function onBoardMousedown(event) {
  if (event.target instanceof Element && event.target.closest('[data-testid="key"], [data-testid="slot"]')) event.preventDefault();
}

function renderInputEnabled() {
  const typing = canType();
  ui.keyboard.querySelectorAll("button").forEach((b) => { b.disabled = !typing; });
  ui.clearButton.disabled = !typing;
  ui.prefill.disabled = !typing || !lastGuess();
  const complete = currentGuess() !== null;
  const paying = canPay() || isClosed() || isSolved(); // broke: say so on the button, before any typing
  ui.submit.disabled = !typing || !complete || !paying;
  ui.submit.textContent = state.submitting ? "Submitting…" : state.retry ? "Retry guess"
    : paying ? "Submit guess" : "Out of funds until the next round";
}

// ---------------------------------------------------------------------------------------------
// Locks

async function onLockToggle(event) {
  const button = event.target.closest('[data-testid="lock-toggle"]');
  if (!button || !state.round) return;
  const i = Number(button.dataset.position);
  const locked = button.dataset.locked === "1";
  button.disabled = true;
  try {
    if (locked) {
      const key = state.locks[String(i)];
      await call("DELETE", roundPath(`/locks/${i}`));
      delete state.locks[String(i)];
      state.slots[i] = key || null; // keep the key in the slot: the player may still want it
      showMessage(ui.message, `Position ${i + 1} unlocked.`, "info");
    } else {
      const result = await call("PUT", roundPath(`/locks/${i}`));
      state.locks[String(i)] = result && result.key ? result.key : state.proven[String(i)];
      showMessage(ui.message, `Position ${i + 1} locked to ${state.locks[String(i)]}: it is filled in for every guess.`, "ok");
    }
    normalizeCursor();
    renderSlots();
    refreshGuesses().catch(() => {});
  } catch (err) {
    showMessage(ui.message, friendlyError(err), "error");
    button.disabled = false;
  }
}

// ---------------------------------------------------------------------------------------------
// Submit

/** The guess as the server takes it: six keys, null at locked positions; null when incomplete. */
function currentGuess() {
  const guess = [];
  for (let i = 0; i < LENGTH; i += 1) {
    if (isLocked(i)) guess.push(null);
    else if (state.slots[i]) guess.push(state.slots[i]);
    else return null;
  }
  return guess;
}

/** The same guess retried keeps its Idempotency-Key; anything else gets a fresh one. */
function idempotencyKeyFor(guess) {
  const fingerprint = JSON.stringify([state.round.round_id, guess]);
  if (!state.retry || state.retry.fingerprint !== fingerprint) state.retry = { fingerprint, key: newIdempotencyKey() };
  return state.retry.key;
}

async function submit() {
  if (!canType()) return;
  const guess = currentGuess();
  if (!guess) {
    showMessage(ui.message, "Fill all six positions first.", "error");
    return;
  }
  const key = idempotencyKeyFor(guess);
  const focused = document.activeElement; // the keys are disabled while submitting: give the focus back after
  state.submitting = true;
  renderInputEnabled();
  try {
    const result = await call("POST", roundPath("/guesses"), { body: { guess }, headers: { "Idempotency-Key": key } });
    state.retry = null;
    state.waiting = { job: result.job_id, text: admittedText(result) };
    showMessage(ui.message, state.waiting.text, "ok");
    state.submitting = false;
    clearSlots();
    refreshWallet().catch(() => {});
    refreshGuesses().catch(() => {});
  } catch (err) {
    if (!isRetryable(err)) state.retry = null;
    if (!state.session) return;
    showMessage(ui.message, friendlyError(err), isRetryable(err) ? "warn" : "error");
    afterRefusal(err);
  } finally {
    state.submitting = false;
    renderInputEnabled();
    const lost = !document.activeElement || document.activeElement === document.body;
    if (lost && focused && focused !== document.body && focused.isConnected && !focused.disabled) focused.focus();
  }
}

function admittedText(result) {
  const charged = result && result.charged;
  const price = charged ? plural(charged.amount, charged.currency) : "nothing";
  if (result && result.status === "duplicate") return `Already admitted (a retry of the same guess): charged ${price} once, not again.`;
  return `Admitted, charged ${price}. Waiting for the score…`;
}

function afterRefusal(err) {
  if (!(err instanceof ApiError)) return;
  if (["round_closed", "round_not_open", "unknown_round"].includes(err.code)) checkRound().catch(() => {});
  if (["already_solved", "max_guesses", "not_proven"].includes(err.code)) refreshGuesses().catch(() => {});
  if (err.code === "insufficient_funds") refreshWallet().catch(() => {});
}

// ---------------------------------------------------------------------------------------------
// Guesses and leaderboard

function guessRow(g) {
  const keys = el("span", { class: "guess-keys", role: "group", "aria-label": "guess" }, (g.guess || []).map((k) => el("span", {}, k)));
  const cells = el("span", { class: "cells" }, keys);
  if (g.feedback) cells.append(renderMarks(g.feedback.marks));
  const stateText = g.state === "scored" && g.feedback
    ? `${g.feedback.hits} hit${g.feedback.hits === 1 ? "" : "s"} · ${g.feedback.nears} near${g.feedback.nears === 1 ? "" : "s"}`
    : { queued: "waiting…", delayed: "delayed…", active: "scoring…", dead: "could not be scored" }[g.state] || g.state;
  return el("li", { class: "guess-row", dataset: { testid: "guess-row", job: g.job_id, state: g.state } },
    el("span", { class: "attempt", title: g.job_id }, g.attempt ? `#${g.attempt}` : "…"),
    cells,
    el("span", { class: "row guess-status" },
      el("span", { class: "badge", dataset: { testid: "guess-state", state: g.state } }, g.state),
      el("span", { class: "muted small" }, stateText),
      el("span", { class: "muted small" }, formatClock(g.scored_ms || g.submitted_ms))));
}

function renderGuesses() {
  clear(ui.guesses);
  const newestFirst = [...state.guesses].reverse();
  newestFirst.forEach((g) => ui.guesses.append(guessRow(g)));
  ui.noGuesses.hidden = state.guesses.length > 0;
  setText(ui.guessCount, state.guesses.length ? `(${state.guesses.length})` : "");
  const solvedGuess = state.guesses.find((g) => g.feedback && g.feedback.solved);
  ui.solved.hidden = !solvedGuess;
  if (solvedGuess) {
    const n = solvedGuess.attempt || state.guesses.indexOf(solvedGuess) + 1;
    setText(ui.solved, `🎉 Solved in ${n} attempt${n === 1 ? "" : "s"}!`);
    ui.solved.dataset.attempts = n;
  }
}

function boardRow(entry) {
  const me = state.session && entry.player_id === state.session.player_id;
  return el("tr", { class: me ? "me" : null, dataset: { testid: "board-row", player: entry.player_id, rank: entry.rank } },
    el("td", { class: "num" }, entry.rank),
    el("td", { class: "name" }, entry.name, me ? " (you)" : ""),
    el("td", { class: "num", title: `best guess: ${entry.hits} hits`, dataset: { testid: "board-hits" } }, entry.hits),
    el("td", { class: "num", title: `best guess: ${entry.nears} nears`, dataset: { testid: "board-nears" } }, entry.nears),
    el("td", { class: "num", dataset: { testid: "board-attempts" } }, entry.attempts),
    el("td", { class: "center", dataset: { testid: "board-solved" } },
      entry.solved ? el("span", { role: "img", "aria-label": "solved" }, "✅") : ""));
}

function renderBoard(entries) {
  clear(ui.boardBody);
  if (!entries.length) {
    ui.boardBody.append(el("tr", { class: "empty" }, el("td", { colspan: 6 }, "No scored guesses yet.")));
    return;
  }
  entries.forEach((entry) => ui.boardBody.append(boardRow(entry)));
}

// ---------------------------------------------------------------------------------------------
// Boot

function boot() {
  ui.form.addEventListener("submit", onJoin);
  ui.leave.addEventListener("click", onLeave);
  ui.keyboard.addEventListener("click", onKeyClick);
  ui.keyboard.addEventListener("mousedown", onBoardMousedown);
  ui.slots.addEventListener("mousedown", onBoardMousedown);
  ui.slots.addEventListener("click", (event) => {
    if (event.target.closest('[data-testid="lock-toggle"]')) onLockToggle(event);
    else onSlotClick(event);
  });
  ui.submit.addEventListener("click", submit);
  ui.clearButton.addEventListener("click", clearSlots);
  ui.prefill.addEventListener("click", prefillLast);
  wireShare(ui.share);
  ui.nextRound.addEventListener("click", onNextRound);
  ui.newRecovery.addEventListener("click", onNewRecovery);
  initAccounts({
    onSignedIn: (session) => {
      state.session = session;
      startGame();
    },
  });
  document.addEventListener("keydown", onKeydown);
  window.addEventListener("pagehide", closeEvents);
  state.session = getSession();
  if (state.session) startGame();
  else showJoin("");
}

boot();
