// Codemojex · sending a guess from the Play page and announcing its score (an ES module play.js builds
// with createSubmit).
//
// POST /api/rounds/{round}/guesses with a fresh Idempotency-Key per guess, the same key when the same
// guess is retried after an error whose effect is unknown (a network error, a 503), so it is charged
// once. The message says what was charged; once the guess is scored (the guesses reloaded), its hits
// and nears are added to it (reportScored), unless another message came since.

import { ApiError, isRetryable, newIdempotencyKey, showMessage, friendlyError } from "/static/common.js";
import { PENDING, roundPath, canType, currentGuess } from "/static/play_state.js";
import { plural } from "/static/views.js";

function admittedText(result) {
  const charged = result && result.charged;
  const price = charged ? plural(charged.amount, charged.currency) : "nothing";
  if (result && result.status === "duplicate") return `Already admitted (a retry of the same guess): charged ${price} once, not again.`;
  return `Admitted, charged ${price}. Waiting for the score…`;
}

/**
 * Submitting over ``state`` and ``ui``: ``board`` (board.js) is cleared and re-enabled; the callbacks
 * refreshWallet, refreshGuesses and checkRound (promises) reload what a guess or a refusal changed.
 */
export function createSubmit({ state, ui, call, board, refreshWallet, refreshGuesses, checkRound }) {
  /** The same guess retried keeps its Idempotency-Key; anything else gets a fresh one. */
  function idempotencyKeyFor(guess) {
    const fingerprint = JSON.stringify([state.round.round_id, guess]);
    if (!state.retry || state.retry.fingerprint !== fingerprint) state.retry = { fingerprint, key: newIdempotencyKey() };
    return state.retry.key;
  }

  async function submit() {
    if (!canType(state)) return;
    const guess = currentGuess(state);
    if (!guess) {
      showMessage(ui.message, "Fill all six positions first.", "error");
      return;
    }
    const key = idempotencyKeyFor(guess);
    const focused = document.activeElement; // the keys are disabled while submitting: give the focus back after
    state.submitting = true;
    board.renderInputEnabled();
    try {
      const result = await call("POST", roundPath(state, "/guesses"), { body: { guess }, headers: { "Idempotency-Key": key } });
      state.retry = null;
      state.waiting = { job: result.job_id, text: admittedText(result) };
      showMessage(ui.message, state.waiting.text, "ok");
      state.submitting = false;
      board.clearSlots();
      refreshWallet().catch(() => {});
      refreshGuesses().catch(() => {});
    } catch (err) {
      if (!isRetryable(err)) state.retry = null;
      if (!state.session) return;
      showMessage(ui.message, friendlyError(err), isRetryable(err) ? "warn" : "error");
      afterRefusal(err);
    } finally {
      state.submitting = false;
      board.renderInputEnabled();
      const lost = !document.activeElement || document.activeElement === document.body;
      if (lost && focused && focused !== document.body && focused.isConnected && !focused.disabled) focused.focus();
    }
  }

  function afterRefusal(err) {
    if (!(err instanceof ApiError)) return;
    if (["round_closed", "round_not_open", "unknown_round"].includes(err.code)) checkRound().catch(() => {});
    if (["already_solved", "max_guesses", "not_proven"].includes(err.code)) refreshGuesses().catch(() => {});
    if (err.code === "insufficient_funds") refreshWallet().catch(() => {});
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

  return { submit, reportScored };
}
