// Codemojex · the Play page's read-only views: the player's guesses, the round's leaderboard and the
// wallet with the price of the next guess (an ES module play.js and its parts import).
//
// Each function draws what it is given into the page and changes no state; server text lands only in
// textContent (common.js el). The guesses come from GET /api/rounds/{round}/guesses, the board from
// its leaderboard (or the stream's "leaderboard" event), the wallet from GET /api/wallet (economy.js).

import { el, clear, setText, renderMarks, formatClock } from "/static/common.js";
import * as economy from "/static/economy.js";

const CURRENCY_ICONS = { ticket: "🎟️", coin: "🪙" };

/** "1 ticket", "3 coins". */
export const plural = (amount, currency) => `${amount} ${currency}${amount === 1 ? "" : "s"}`;

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

/** The guesses, newest first, their count, and the "Solved in n attempts" banner. */
export function renderGuesses(ui, guesses) {
  clear(ui.guesses);
  const newestFirst = [...guesses].reverse();
  newestFirst.forEach((g) => ui.guesses.append(guessRow(g)));
  ui.noGuesses.hidden = guesses.length > 0;
  setText(ui.guessCount, guesses.length ? `(${guesses.length})` : "");
  const solvedGuess = guesses.find((g) => g.feedback && g.feedback.solved);
  ui.solved.hidden = !solvedGuess;
  if (solvedGuess) {
    const n = solvedGuess.attempt || guesses.indexOf(solvedGuess) + 1;
    setText(ui.solved, `🎉 Solved in ${n} attempt${n === 1 ? "" : "s"}!`);
    ui.solved.dataset.attempts = n;
  }
}

function boardRow(entry, playerId) {
  const me = Boolean(playerId) && entry.player_id === playerId;
  return el("tr", { class: me ? "me" : null, dataset: { testid: "board-row", player: entry.player_id, rank: entry.rank } },
    el("td", { class: "num" }, entry.rank),
    el("td", { class: "name" }, entry.name, me ? " (you)" : ""),
    el("td", { class: "num", title: `best guess: ${entry.hits} hits`, dataset: { testid: "board-hits" } }, entry.hits),
    el("td", { class: "num", title: `best guess: ${entry.nears} nears`, dataset: { testid: "board-nears" } }, entry.nears),
    el("td", { class: "num", dataset: { testid: "board-attempts" } }, entry.attempts),
    el("td", { class: "center", dataset: { testid: "board-solved" } },
      entry.solved ? el("span", { role: "img", "aria-label": "solved" }, "✅") : ""));
}

/** The leaderboard's rows into ``body`` (a tbody); the row of ``playerId`` is marked "(you)". */
export function renderBoard(body, entries, playerId) {
  clear(body);
  if (!entries.length) {
    body.append(el("tr", { class: "empty" }, el("td", { colspan: 6 }, "No scored guesses yet.")));
    return;
  }
  entries.forEach((entry) => body.append(boardRow(entry, playerId)));
}

/** The balances (the round's currencies first), the next guess's price and the economy's rule. */
export function renderWallet(ui, wallet, round) {
  const balances = (wallet && wallet.balances) || {};
  const order = [...new Set([...((round && round.prices) || []).map((p) => p.currency), ...Object.keys(balances)])];
  clear(ui.balances);
  for (const currency of order) {
    ui.balances.append(el("span", { class: "balance-item", title: currency },
      el("span", { class: "emoji", "aria-hidden": "true" }, CURRENCY_ICONS[currency] || "💰"),
      el("span", { dataset: { testid: "balance", currency } }, balances[currency] ?? 0),
      el("span", { class: "muted small" }, currency)));
  }
  const shown = economy.describe(wallet, round, formatClock);
  const price = economy.nextPrice(wallet, round);
  setText(ui.price, shown.price);
  setText(ui.economy, shown.rule);
  ui.economy.dataset.broke = shown.broke ? "1" : "0";
  ui.price.dataset.currency = price ? price.currency : "";
  ui.price.dataset.amount = price ? price.amount : "";
}
