// Codemojex · History page: the closed rounds (GET /api/history), newest close first. Each opens to its
// final leaderboard and, with this browser's player token, that player's own guesses in the round
// (GET /api/history/{round}); once the round's guesses are past their retention, a note says so. A link
// #round=RND opens that round.

import {
  api, ApiError, getSession, el, clear, setText, byTestId, showMessage, renderMarks, friendlyError, formatClock,
} from "/static/common.js";

const PAGE = 20;

const ui = {
  message: byTestId("message"),
  list: byTestId("history"),
  empty: document.getElementById("no-history"),
  more: byTestId("more"),
};

const session = getSession();
let oldest = null;

function when(ms) {
  return `${new Date(ms).toLocaleDateString()} ${formatClock(ms)}`;
}

function winnerRow(winner) {
  const me = session && winner.player_id === session.player_id;
  return el("tr", { class: me ? "me" : null, dataset: { testid: "history-winner", player: winner.player_id } },
    el("td", { class: "num" }, winner.rank),
    el("td", { class: "name" }, winner.name, me ? " (you)" : ""),
    el("td", { class: "num" }, winner.hits),
    el("td", { class: "num" }, winner.nears),
    el("td", { class: "num" }, winner.attempts),
    el("td", { class: "center" }, winner.solved ? "✅" : el("span", { class: "sr-only" }, "no")));
}

function winnersTable(summary) {
  if (!summary.winners.length) return el("p", { class: "muted small" }, "Nobody played this round.");
  return el("div", { class: "table-wrap", tabindex: "0", role: "region", "aria-label": "Final leaderboard" },
    el("table", { dataset: { testid: "history-winners" } },
      el("caption", { class: "sr-only" }, "Final leaderboard"),
      el("thead", {}, el("tr", {},
        el("th", { class: "num", scope: "col" }, "#"),
        el("th", { scope: "col" }, "Player"),
        el("th", { class: "num", scope: "col", title: "hits of the best guess" }, "Hits"),
        el("th", { class: "num", scope: "col", title: "nears of the best guess" }, "Nears"),
        el("th", { class: "num", scope: "col" }, "Tries"),
        el("th", { class: "center", scope: "col" }, "Solved"))),
      el("tbody", {}, summary.winners.map(winnerRow))));
}

function guessItem(g) {
  const keys = el("span", { class: "guess-keys" }, (g.guess || []).map((k) => el("span", {}, k)));
  return el("li", { class: "guess-row", dataset: { testid: "my-guess", job: g.job_id } },
    keys, g.feedback ? renderMarks(g.feedback.marks) : el("span", { class: "muted small" }, g.state));
}

async function loadMine(details, summary) {
  const box = details.querySelector(".mine");
  if (box.dataset.loaded) return;
  box.dataset.loaded = "1";
  if (!session) {
    box.append(el("p", { class: "muted small", dataset: { testid: "guesses-note" } },
      "Join on the Play page to see your own guesses here."));
    return;
  }
  try {
    const data = await api("GET", `/api/history/${summary.round_id}`, { token: session.token });
    const mine = data.guesses || [];
    if (!data.guesses_kept) {
      box.append(el("p", { class: "muted small", dataset: { testid: "guesses-note" } },
        "The guesses of this round are no longer kept: only its code and its board are."));
    } else if (!mine.length) {
      box.append(el("p", { class: "muted small", dataset: { testid: "guesses-note" } }, "You made no guess in this round."));
    } else {
      box.append(el("h3", {}, "Your guesses"),
        el("ol", { class: "guesses", dataset: { testid: "my-guesses" } }, mine.map(guessItem)));
      if (data.kept_until_ms) {
        box.append(el("p", { class: "muted small" }, `Kept until ${when(data.kept_until_ms)}.`));
      }
    }
  } catch (err) {
    delete box.dataset.loaded;
    const text = err instanceof ApiError && err.status === 401
      ? "Your session has ended: join again on the Play page to see your guesses."
      : friendlyError(err);
    showMessage(ui.message, text, "error");
  }
}

function roundCard(summary) {
  const secret = summary.secret ? summary.secret.join(" ") : "?";
  const details = el("details", { class: "card", dataset: { testid: "history-round", round: summary.round_id } },
    el("summary", {},
      el("span", { class: "secret small", dataset: { testid: "history-secret" }, "aria-label": "the code" }, secret),
      " ",
      el("span", { class: "muted small", dataset: { testid: "history-closed" } }, `closed ${when(summary.closed_ms)}`),
      " · ",
      el("span", { class: "muted small", dataset: { testid: "history-counts" } },
        `${summary.players} player${summary.players === 1 ? "" : "s"}, ${summary.guesses} guess${summary.guesses === 1 ? "" : "es"}`)),
    el("p", { class: "muted small" }, "Round ", el("code", {}, summary.round_id)),
    winnersTable(summary),
    el("div", { class: "mine" }));
  details.addEventListener("toggle", () => {
    if (details.open) loadMine(details, summary).catch(() => {});
  });
  return details;
}

async function loadPage() {
  const params = new URLSearchParams({ limit: String(PAGE) });
  if (oldest !== null) {
    params.set("before_ms", String(oldest.closed_ms));
    params.set("before_round", oldest.round_id); // rounds closed in the same ms are neither lost nor repeated
  }
  try {
    const data = await api("GET", `/api/history?${params}`);
    const rounds = data.rounds || [];
    rounds.forEach((summary) => ui.list.append(roundCard(summary)));
    if (rounds.length) oldest = rounds[rounds.length - 1];
    ui.more.hidden = rounds.length < PAGE;
    ui.empty.hidden = ui.list.children.length > 0;
    openFromUrl();
  } catch (err) {
    showMessage(ui.message, friendlyError(err), "error");
  }
}

function openFromUrl() {
  const match = /^#round=(RND[0-9A-Z]+)$/.exec(window.location.hash || "");
  if (!match) return;
  const details = ui.list.querySelector(`[data-round="${match[1]}"]`);
  if (details && !details.open) {
    details.open = true;
    details.scrollIntoView({ block: "start" });
  }
}

function boot() {
  clear(ui.list);
  setText(ui.message, "");
  ui.more.addEventListener("click", () => loadPage());
  window.addEventListener("hashchange", openFromUrl);
  loadPage();
}

boot();
