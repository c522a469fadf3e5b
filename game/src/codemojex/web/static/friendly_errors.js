// Codemojex · friendly error texts shared by every page (common.js re-exports friendlyError).
//
// One player-facing text per error code of the contract (docs/http-api.md), the guess's problem spelled
// out, the server's suggestion for a taken name, and the server's own message where a generic code
// says less than it.

import { ApiError } from "/static/api.js";

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
