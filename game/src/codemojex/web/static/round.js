// Codemojex · the round the Play page shows: picking it, its header (id, status, timer), its close with
// the secret and the winners, and the timers that poll while it is shown (an ES module play.js builds
// with createRound).
//
// The round comes from the lobby (lobby.js): the one the URL names, else the newest open one; with
// none, the page says so and looks again every 3 s. Switching rounds resets the board, the guesses and
// the notices, and opens the round's event stream (live.js). While the round is shown, timers reload
// pending guesses (2 s), the leaderboard while the stream is not live (5 s), the round's status (3 s)
// and redraw the countdowns (1 s). A closed round offers the next open round with a button.

import { ApiError, clear, setText, showMessage, friendlyError, formatClock, formatDuration, every } from "/static/common.js";
import { renderWinners, fetchSummary, roundInUrl, keepRoundInUrl } from "/static/lobby.js";
import { clearNotices } from "/static/notices.js";
import { PENDING, emptySlots, roundPath, isClosed } from "/static/play_state.js";
import { renderBoard, renderWallet } from "/static/views.js";

/**
 * The round over ``state`` and ``ui``: ``clock`` is the server clock, ``lobby`` the lobby (lobby.js),
 * ``board`` the guess board (board.js), ``live`` the stream (live.js); refreshGuesses, refreshBoard and
 * refreshWallet (promises) reload the round's data.
 */
export function createRound({ state, ui, clock, lobby, call, board, live, refreshGuesses, refreshBoard, refreshWallet }) {
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
    renderBoard(ui.boardBody, [], state.session && state.session.player_id);
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
      state.slots = emptySlots();
      state.cursor = 0;
      state.guesses = [];
      state.locks = {};
      state.proven = {};
      state.keys = {};
      state.share = null;
      clearNotices(ui.notices);
      state.retry = null;
      showMessage(ui.message, "");
      board.renderKeyboard();
      startRoundTimers();
      live.open();
      refreshGuesses().catch(() => {});
      refreshBoard().catch(() => {});
      refreshWallet().catch(() => {}); // the offer of this round (economy.js)
    }
    renderRound();
    board.renderSlots();
    renderWallet(ui, state.wallet, state.round);
  }

  function renderRound() {
    const round = state.round;
    ui.panel.hidden = !round;
    if (!round) return;
    setText(ui.roundId, round.round_id);
    setText(ui.roundStatus, round.status);
    ui.roundStatus.dataset.state = round.status;
    const closed = isClosed(state);
    ui.closed.hidden = !closed;
    if (closed) {
      setText(ui.secret, Array.isArray(round.secret) ? round.secret.join(" ") : String(round.secret || "?"));
      ui.nextRound.hidden = !state.nextRound;
      if (ui.winners.dataset.round !== round.round_id) showWinners().catch(() => {});
    }
    renderTimer();
    board.renderInputEnabled();
  }

  function renderTimer() {
    const round = state.round;
    if (!round) return;
    const now = clock.now();
    let text = "";
    if (isClosed(state)) text = round.closed_ms ? `closed at ${formatClock(round.closed_ms)}` : "closed";
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
    if (!isClosed(state)) {
      const round = await call("GET", roundPath(state));
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
    live.close();
  }

  return { loadRound, setRound, checkRound, showWinners, onNextRound, stopRound };
}
