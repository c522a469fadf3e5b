// Codemojex · Dashboard: round control (imported by dashboard.js).
//
// - The current round (the open one, else the newest), with "Close this round";
// - "Open a new round": a form with the options POST /api/operator/rounds takes (keyboard size or emoji,
//   prices, delay, duration, max guesses). Blank fields are left out (the server's defaults); the values are
//   sent as typed and the server judges them: a refusal shows its reason in the form (role="alert") and
//   marks the field it names aria-invalid, and nothing is opened;
// - every open or scheduled round (GET /api/rounds, the newest 100), each with its own Close button;
// - a close always asks first, in a modal <dialog> whose Cancel has the focus (Escape cancels too).

import { api, ApiError, el, clear, setText, byTestId, showMessage, friendlyError, formatClock, formatRelative } from "/static/common.js";

const LISTED = new Set(["open", "scheduled"]);
const NUMBERS = ["size", "delay_s", "duration_s", "max_guesses"];
// Which field a refusal's text names (the server's InvalidOption messages).
const NAMED = [
  ["size", /\bsize\b/],
  ["keyboard", /keyboard(?!'s size)|\bkeys?\b|emoji/],
  ["prices", /price|currenc|amount/],
  ["delay_s", /delay/],
  ["duration_s", /duration/],
  ["max_guesses", /max_guesses/],
];

/**
 * Wire the round control. `call(method, path, options)` is the dashboard's operator call (a 401/403
 * shows its token form); `token()` the operator token; `refreshSoon()` asks for a refresh of the page.
 */
export function roundControl({ call, token, refreshSoon, message }) {
  const ui = {
    roundId: byTestId("round-id"),
    roundStatus: byTestId("round-status"),
    roundTimer: byTestId("round-timer"),
    roundKeyboard: byTestId("round-keyboard"),
    openRound: byTestId("open-round"),
    closeRound: byTestId("close-round"),
    form: byTestId("open-form"),
    formError: byTestId("open-error"),
    submit: byTestId("open-submit"),
    cancel: byTestId("open-cancel"),
    list: byTestId("open-rounds").querySelector("tbody"),
    summary: byTestId("open-rounds-summary"),
    confirm: byTestId("confirm"),
    confirmText: byTestId("confirm-text"),
    confirmYes: byTestId("confirm-yes"),
    confirmNo: byTestId("confirm-no"),
  };
  const state = { round: null, open: [], listed: "", busy: false };

  // -------------------------------------------------------------------------------------------
  // Reading (round reads never reset the operator token: api, not call)

  async function refresh() {
    try {
      state.round = await current();
      const list = await api("GET", "/api/rounds?limit=100", { token: token() });
      state.open = (list.rounds || []).filter((r) => LISTED.has(r.status));
    } catch (err) {
      setText(ui.roundTimer, `round unavailable: ${friendlyError(err)}`);
      return;
    }
    render();
  }

  /** The current open round, else the newest (read by id: the list omits secrets). */
  async function current() {
    try {
      return await api("GET", "/api/rounds/current", { token: token() });
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== "no_open_round") throw err;
    }
    const list = await api("GET", "/api/rounds?limit=1", { token: token() });
    const newest = (list.rounds || [])[0];
    return newest ? api("GET", `/api/rounds/${encodeURIComponent(newest.round_id)}`, { token: token() }) : null;
  }

  function render() {
    const round = state.round;
    setText(ui.roundId, round ? round.round_id : "no round yet");
    setText(ui.roundStatus, round ? round.status : "none");
    ui.roundStatus.dataset.state = round ? round.status : "none";
    setText(ui.roundKeyboard, round ? (round.keyboard || []).join(" ") : "");
    ui.closeRound.disabled = state.busy || !round || round.status !== "open";
    ui.openRound.disabled = state.busy;
    ui.submit.disabled = state.busy;
    setText(ui.roundTimer, round ? timing(round) : "");
    renderList();
  }

  function timing(round) {
    const now = round.server_ms || Date.now();
    const parts = [];
    if (round.status === "scheduled" && round.opens_ms) parts.push(`opens ${formatRelative(round.opens_ms, now)}`);
    if (round.status === "open" && round.closes_ms) parts.push(`closes ${formatRelative(round.closes_ms, now)}`);
    if (round.status === "closed" && round.closed_ms) parts.push(`closed at ${formatClock(round.closed_ms)}`);
    if (round.secret) parts.push(`secret ${Array.isArray(round.secret) ? round.secret.join("") : round.secret}`);
    const prices = (round.prices || []).map((p) => `${p.amount} ${p.currency}${p.amount === 1 ? "" : "s"}`).join(" or ");
    if (prices) parts.push(`price ${prices}`);
    if (round.max_guesses) parts.push(`at most ${round.max_guesses} guesses`);
    return parts.join(" · ");
  }

  /** The open rounds' table: rebuilt when the set changes, else only its timings (a focused button stays). */
  function renderList() {
    const listed = state.open.map((r) => `${r.round_id}:${r.status}`).join(",");
    setText(ui.summary, `(${state.open.length})`);
    if (listed === state.listed) {
      state.open.forEach((r) => {
        const cell = ui.list.querySelector(`[data-round="${r.round_id}"] [data-testid="round-timing"]`);
        setText(cell, timing(r));
      });
      return;
    }
    state.listed = listed;
    clear(ui.list);
    if (!state.open.length) ui.list.append(el("tr", { class: "empty" }, el("td", { colspan: 5 }, "No round is open.")));
    for (const r of state.open) {
      ui.list.append(el("tr", { dataset: { testid: "open-round-row", round: r.round_id, status: r.status } },
        el("td", {}, el("code", {}, r.round_id)),
        el("td", {}, el("span", { class: "badge", dataset: { state: r.status } }, r.status)),
        el("td", { class: "emoji" }, (r.keyboard || []).join("")),
        el("td", { class: "wrap", dataset: { testid: "round-timing" } }, timing(r)),
        el("td", {}, el("button", {
          type: "button", class: "small danger", "aria-label": `Close round ${r.round_id}`,
          dataset: { testid: "round-close", round: r.round_id },
        }, "Close"))));
    }
  }

  // -------------------------------------------------------------------------------------------
  // Closing, always confirmed

  /** Ask in the modal dialog; resolves true for "Close the round", false for Cancel or Escape. */
  function confirmClose(roundId) {
    setText(ui.confirmText, `Close round ${roundId}? Players can no longer guess in it, and its secret is `
      + "revealed to everyone. This cannot be undone.");
    return new Promise((resolve) => {
      ui.confirm.addEventListener("close", () => resolve(ui.confirm.returnValue === "close"), { once: true });
      ui.confirm.returnValue = "";
      ui.confirm.showModal();
      ui.confirmNo.focus();
    });
  }

  async function close(roundId, opener) {
    if (!roundId || state.busy) return;
    const yes = await confirmClose(roundId);
    if (opener && opener.isConnected) opener.focus();
    if (!yes) {
      showMessage(message, `Round ${roundId} left open.`, "info");
      return;
    }
    await act(async () => {
      const result = await call("POST", `/api/operator/rounds/${encodeURIComponent(roundId)}/close`);
      showMessage(message, `Closed round ${result.round_id} at ${formatClock(result.closed_ms)}.`, "ok");
    });
  }

  async function act(fn) {
    state.busy = true;
    render();
    try {
      await fn();
    } catch (err) {
      showMessage(message, friendlyError(err), "error");
    } finally {
      state.busy = false;
      render();
      refreshSoon();
    }
  }

  // -------------------------------------------------------------------------------------------
  // Opening, with options

  function toggleForm(show) {
    ui.form.hidden = !show;
    ui.openRound.setAttribute("aria-expanded", String(show));
    clearFormError();
    if (show) ui.form.elements.size.focus();
    else ui.openRound.focus();
  }

  function clearFormError() {
    ui.formError.hidden = true;
    setText(ui.formError, "");
    [...ui.form.elements].forEach((field) => field.removeAttribute("aria-invalid"));
  }

  /** The request body: the fields filled in, as typed (numbers as numbers); the server judges them. */
  function spec() {
    const fields = ui.form.elements;
    const body = {};
    for (const name of NUMBERS) {
      const raw = fields[name].value.trim();
      if (raw !== "") body[name] = Number.isFinite(Number(raw)) ? Number(raw) : raw;
    }
    const keyboard = fields.keyboard.value.trim();
    if (keyboard) body.keyboard = splitKeys(keyboard);
    const prices = fields.prices.value.trim();
    if (prices) body.prices = prices.split(",").map(parsePrice);
    return body;
  }

  function showFormError(err) {
    const listed = err instanceof ApiError && err.body && err.body.error && err.body.error.errors;
    const named = new Set();
    let text = friendlyError(err);
    if (Array.isArray(listed) && listed.length) {
      text = `Not opened: ${listed.map((e) => {
        const where = (e.loc || []).filter((part) => part !== "body");
        if (where.length) named.add(where[0]);
        return `${where.join(".") || "the request"}: ${e.msg}`;
      }).join("; ")}`;
    } else {
      text = `Not opened. ${text}`;
      const said = err instanceof ApiError ? err.message : "";
      NAMED.forEach(([name, pattern]) => pattern.test(said) && named.add(name));
    }
    setText(ui.formError, text);
    ui.formError.hidden = false;
    named.forEach((name) => ui.form.elements[name] && ui.form.elements[name].setAttribute("aria-invalid", "true"));
  }

  async function onOpen(event) {
    event.preventDefault();
    if (state.busy) return;
    clearFormError();
    const body = spec();
    state.busy = true;
    render();
    try {
      const round = await call("POST", "/api/operator/rounds", { body });
      state.round = round;
      showMessage(message, `Opened round ${round.round_id}.`, "ok");
      ui.form.reset();
      toggleForm(false);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return;
      showFormError(err);
    } finally {
      state.busy = false;
      render();
      refreshSoon();
    }
  }

  // -------------------------------------------------------------------------------------------
  // Wiring

  ui.openRound.addEventListener("click", () => toggleForm(ui.form.hidden));
  ui.cancel.addEventListener("click", () => toggleForm(false));
  ui.form.addEventListener("submit", onOpen);
  ui.closeRound.addEventListener("click", () => close(state.round && state.round.round_id, ui.closeRound));
  ui.list.addEventListener("click", (event) => {
    const button = event.target.closest('[data-testid="round-close"]');
    if (button) close(button.dataset.round, button);
  });
  ui.confirmYes.addEventListener("click", () => ui.confirm.close("close"));
  ui.confirmNo.addEventListener("click", () => ui.confirm.close("cancel"));

  return { refresh };
}

/** "🍎 🍌 🍇" or "🍎🍌🍇" → ["🍎", "🍌", "🍇"]: split on spaces, else into graphemes. */
function splitKeys(text) {
  if (/\s/.test(text)) return text.split(/\s+/).filter(Boolean);
  if (typeof Intl !== "undefined" && Intl.Segmenter) {
    return [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(text)].map((s) => s.segment);
  }
  return [...text];
}

/** "2 ticket" (or "ticket 2") → {currency: "ticket", amount: 2}; anything else is sent as typed. */
function parsePrice(text) {
  const parts = text.trim().split(/\s+/);
  const number = parts.findIndex((part) => /^-?\d+(\.\d+)?$/.test(part));
  if (parts.length !== 2 || number < 0) return { currency: text.trim(), amount: null };
  return { currency: parts[1 - number], amount: Number(parts[number]) };
}
