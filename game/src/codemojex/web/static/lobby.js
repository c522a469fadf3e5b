// Codemojex · the play page's lobby and winner announcement (an ES module play.js and round.js import).
//
// The lobby lists every open round (GET /api/lobby) with a countdown to its close on the server's clock,
// and the next round to open; a click switches the page to that round (its guesses, board, events). The
// round picked is kept in the URL (#round=RND), so a reload comes back to it while it is open. The
// winner announcement shows a closed round's secret and the top of its final board, from the "closed"
// event or, when the page missed it, from GET /api/history/{round}; it links to the history page.

import { el, clear, setText, formatDuration, shortId } from "/static/common.js";

const HASH = /^#round=(RND[0-9A-Z]+)$/;

/** The round id the URL names (#round=RND...), or null. */
export function roundInUrl() {
  const match = HASH.exec(window.location.hash || "");
  return match ? match[1] : null;
}

/** Name ``roundId`` in the URL without a new history entry. */
export function keepRoundInUrl(roundId) {
  const wanted = roundId ? `#round=${roundId}` : "";
  if (window.location.hash !== wanted) {
    window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}${wanted}`);
  }
}

function closesText(round, now) {
  if (!round.closes_ms) return "no time limit";
  return round.closes_ms > now ? `closes in ${formatDuration(round.closes_ms - now)}` : "closing…";
}

/**
 * The lobby: ``list`` (an element for the round buttons) and ``next`` (a line for the next round),
 * ``clock`` (serverClock), ``call`` (a player call), ``onPick(round)`` when a round is clicked.
 */
export function createLobby({ list, next, clock, call, onPick }) {
  const lobby = { rounds: [], upcoming: [], current: null };

  async function refresh() {
    const data = await call("GET", "/api/lobby");
    clock.update(data.server_ms);
    lobby.rounds = data.rounds || [];
    lobby.upcoming = data.upcoming || [];
    render();
    return lobby;
  }

  function render() {
    clear(list);
    const now = clock.now();
    lobby.rounds.forEach((round) => {
      const current = round.round_id === lobby.current;
      list.append(el("li", {},
        el("button", {
          type: "button",
          class: current ? "lobby-round current" : "lobby-round",
          "aria-current": current ? "true" : null,
          title: `Play round ${round.round_id}`,
          dataset: { testid: "lobby-round", round: round.round_id },
          onclick: () => onPick(round),
        },
        el("code", {}, shortId(round.round_id)),
        " ",
        el("span", { class: "muted small", dataset: { testid: "lobby-closes" } }, closesText(round, now)))));
    });
    list.hidden = lobby.rounds.length === 0;
    tick();
  }

  /** Update the countdowns (each second). */
  function tick() {
    const now = clock.now();
    list.querySelectorAll('[data-testid="lobby-round"]').forEach((button) => {
      const round = lobby.rounds.find((r) => r.round_id === button.dataset.round);
      if (round) setText(button.querySelector('[data-testid="lobby-closes"]'), closesText(round, now));
    });
    const upcoming = lobby.upcoming.find((r) => r.opens_ms > now);
    next.hidden = !upcoming;
    if (upcoming) setText(next, `Next round opens in ${formatDuration(upcoming.opens_ms - now)}`);
  }

  function setCurrent(roundId) {
    lobby.current = roundId;
    render();
  }

  /** The round to play: the URL's or the current one while open, else the newest open round. */
  function pick(preferred) {
    return lobby.rounds.find((r) => r.round_id === preferred) || lobby.rounds[0] || null;
  }

  return { refresh, render, tick, setCurrent, pick, state: lobby };
}

function winnerItem(winner, me) {
  const mine = me && winner.player_id === me;
  const detail = winner.solved
    ? `solved in ${winner.attempts} attempt${winner.attempts === 1 ? "" : "s"}`
    : `best 🟩×${winner.hits} 🟨×${winner.nears}`;
  return el("li", { class: mine ? "me" : null, dataset: { testid: "winner", player: winner.player_id } },
    el("strong", {}, winner.name), mine ? " (you)" : "", " · ", el("span", { class: "muted" }, detail));
}

/**
 * Show the winners of a closed round in ``container`` (its list of up to three, a link to the round's
 * history): ``summary`` as the "closed" event and GET /api/history/{round} give it; ``me`` the player.
 */
export function renderWinners(container, summary, me) {
  clear(container);
  if (!summary) {
    container.hidden = true;
    return;
  }
  const top = (summary.winners || []).slice(0, 3);
  const solvedBy = (summary.winners || []).filter((w) => w.solved).length;
  const headline = top.length === 0
    ? "Nobody played this round."
    : `${top[0].solved ? "🏆 Won by" : "🏅 Best guess by"} ${top[0].name}` +
      (solvedBy > 1 ? ` · ${solvedBy} players solved it` : "");
  container.append(
    el("p", { dataset: { testid: "winner-headline" } }, headline),
    el("ol", { class: "winners" }, top.map((w) => winnerItem(w, me))),
    el("p", { class: "muted small" },
      `${summary.players} player${summary.players === 1 ? "" : "s"}, ${summary.guesses} guess${summary.guesses === 1 ? "" : "es"} · `,
      el("a", { href: `/history#round=${summary.round_id}`, dataset: { testid: "history-of-round" } }, "see it in the history")),
  );
  container.hidden = false;
  container.dataset.round = summary.round_id;
}

/** The summary of a closed round from the history (null until the worker has concluded it). */
export async function fetchSummary(call, roundId) {
  try {
    const data = await call("GET", `/api/history/${roundId}`);
    return data.summary;
  } catch {
    return null;
  }
}
