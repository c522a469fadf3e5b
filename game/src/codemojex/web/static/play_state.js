// Codemojex · the Play page's state and the rules read from it (an ES module play.js and its parts import).
//
// One state object per page (newState); the predicates here read it and change nothing: whether the
// round is closed or solved, whether the player can type or pay, which positions are locked, the guess
// as the server takes it (null at locked positions), the newest guess, the round's API path. No DOM.

import * as economy from "/static/economy.js";

export const LENGTH = 6;
export const PENDING = new Set(["queued", "delayed", "active"]);

export const emptySlots = () => Array(LENGTH).fill(null);

/** The page's state, shared by play.js and the parts it builds (board, guess, live, round, session). */
export function newState() {
  return {
    session: null,
    round: null,
    nextRound: null,
    slots: emptySlots(),
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
}

/** "/api/rounds/RND…" plus suffix, for the round shown. */
export const roundPath = (state, suffix = "") => `/api/rounds/${encodeURIComponent(state.round.round_id)}${suffix}`;

export function isClosed(state) {
  return Boolean(state.round && (state.round.status === "closed" || state.round.secret));
}

export function isSolved(state) {
  return state.guesses.some((g) => g.feedback && g.feedback.solved);
}

export function canType(state) {
  return Boolean(state.round) && !isClosed(state) && !isSolved(state) && !state.submitting;
}

/** Whether the next guess can be paid (the server's offer; true while it is not known yet). */
export const canPay = (state) => economy.nextPrice(state.wallet, state.round) !== null;

export const isLocked = (state, i) => Object.prototype.hasOwnProperty.call(state.locks, String(i));

/** The newest admitted guess of six keys, or null. */
export function lastGuess(state) {
  const last = [...state.guesses].reverse().find((g) => Array.isArray(g.guess) && g.guess.length === LENGTH);
  return last ? last.guess : null;
}

/** The guess as the server takes it: six keys, null at locked positions; null when incomplete. */
export function currentGuess(state) {
  const guess = [];
  for (let i = 0; i < LENGTH; i += 1) {
    if (isLocked(state, i)) guess.push(null);
    else if (state.slots[i]) guess.push(state.slots[i]);
    else return null;
  }
  return guess;
}
