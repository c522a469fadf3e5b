// Codemojex · Dashboard page, for operators.
//
// The operator token comes from the URL fragment (#operator=<token>, kept in sessionStorage and then
// removed from the address bar) or from the form; a 401/403 shows the form again. Every 2 s it reads the
// queue's stats (jobs per state, counters, lanes), the active leases, the dead letters (each can be
// retried) and the throughput (an inline SVG chart), and the rounds (dashboard_rounds.js): the current one,
// every open one, a form to open a new one with options, and a confirmed close for each.

import {
  api, ApiError, el, clear, setText, byTestId, showMessage, friendlyError,
  formatClock, formatDuration, formatRelative, shortId, every,
} from "/static/common.js";
import { roundControl } from "/static/dashboard_rounds.js";

const TOKEN_KEY = "cmx.operator";
const STATES = ["queued", "delayed", "active", "done", "dead"];
const SVG = "http://www.w3.org/2000/svg";
const CHART = { width: 640, height: 200, left: 44, right: 14, top: 12, bottom: 30, windowMs: 10 * 60 * 1000 };

const ui = {
  message: byTestId("message"),
  form: byTestId("operator-form"),
  formEl: document.getElementById("operator-form"),
  tokenInput: byTestId("operator-token"),
  dashboard: byTestId("dashboard"),
  updated: byTestId("updated"),
  forget: byTestId("operator-forget"),
  deadDepth: document.getElementById("dead-depth"),
  chart: byTestId("throughput"),
  rate: byTestId("throughput-rate"),
  lanes: byTestId("lanes").querySelector("tbody"),
  lanesSummary: byTestId("lanes-summary"),
  leases: byTestId("leases").querySelector("tbody"),
  dead: byTestId("dead").querySelector("tbody"),
  deadSummary: byTestId("dead-summary"),
  counters: byTestId("counters").querySelector("tbody"),
};

const state = { token: null, serverMs: null, timer: null, failing: false };

// ---------------------------------------------------------------------------------------------
// The operator token

function readToken() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const fromHash = params.get("operator");
  if (fromHash) {
    storeToken(fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return fromHash;
  }
}

function storeToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage off: the token lives in memory for this page */
  }
}

function showForm(text) {
  stop();
  state.token = null;
  storeToken(null);
  ui.dashboard.hidden = true;
  ui.form.hidden = false;
  showMessage(ui.message, text || "", "warn");
  ui.tokenInput.focus();
}

function onSave(event) {
  event.preventDefault();
  const token = ui.tokenInput.value.trim();
  if (!token) return;
  ui.tokenInput.value = "";
  storeToken(token);
  start(token);
}

function start(token) {
  state.token = token;
  ui.form.hidden = true;
  ui.dashboard.hidden = false;
  showMessage(ui.message, "");
  stop();
  state.timer = every(2000, refresh);
  state.timer.now();
}

function stop() {
  if (state.timer) state.timer.stop();
  state.timer = null;
}

/** An operator call; 401/403 means the token is wrong: back to the form. */
async function call(method, path, options = {}) {
  try {
    return await api(method, path, { ...options, token: state.token });
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
      showForm("The operator token was refused. Paste the one `codemojex serve` printed.");
    }
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Refresh

async function refresh() {
  if (!state.token) return;
  try {
    await refreshAll();
    if (state.failing) showMessage(ui.message, "");
    state.failing = false;
  } catch (err) {
    if (!state.token || !(err instanceof ApiError)) throw err;
    state.failing = true;
    showMessage(ui.message, `${friendlyError(err)} Retrying every 2 s…`, "error");
  }
}

async function refreshAll() {
  const stats = await call("GET", "/api/operator/stats"); // first alone: a wrong token costs one call
  const [leases, dead, throughput] = await Promise.all([
    call("GET", "/api/operator/leases"),
    call("GET", "/api/operator/dead"),
    call("GET", "/api/operator/throughput"),
  ]);
  if (!state.token) return;
  state.serverMs = stats.server_ms;
  const prefix = document.querySelector('[data-testid="bus-prefix"]');
  if (prefix && stats.tag) prefix.textContent = `emq:{${stats.tag}}:`;
  renderDepths(stats.depth || {});
  renderCounters(stats.counters || {});
  renderLanes(stats);
  renderLeases(leases);
  renderDead(dead.dead || [], (stats.depth || {}).dead);
  renderChart(throughput, stats.server_ms || leases.server_ms || Date.now());
  await rounds.refresh();
  setText(ui.updated, formatClock(Date.now()));
}

// ---------------------------------------------------------------------------------------------
// Tables

function renderDepths(depth) {
  for (const s of STATES) {
    const node = document.querySelector(`[data-testid="depth"][data-state="${s}"]`);
    setText(node, String(depth[s] ?? 0));
  }
  ui.deadDepth.dataset.nonzero = (depth.dead || 0) > 0 ? "1" : "0";
}

function emptyRow(body, columns, text) {
  body.append(el("tr", { class: "empty" }, el("td", { colspan: columns }, text)));
}

function renderCounters(counters) {
  clear(ui.counters);
  const names = Object.keys(counters).sort();
  if (!names.length) emptyRow(ui.counters, 2, "No counters yet.");
  for (const name of names) {
    ui.counters.append(el("tr", { dataset: { testid: "counter", name } },
      el("td", {}, el("code", {}, name)),
      el("td", { class: "num" }, counters[name])));
  }
}

function renderLanes(stats) {
  const lanes = stats.lanes || [];
  clear(ui.lanes);
  if (!lanes.length) emptyRow(ui.lanes, 3, "No lane is waiting.");
  for (const lane of lanes) {
    ui.lanes.append(el("tr", { dataset: { testid: "lane-row", lane: lane.lane } },
      el("td", { title: lane.lane }, el("code", {}, lane.lane)),
      el("td", { class: "num" }, lane.depth),
      el("td", { class: "num" }, lane.lag ?? "–")));
  }
  const total = stats.lanes_total ?? lanes.length;
  const shown = total > lanes.length ? `showing ${lanes.length} of ${total}` : `${total} waiting`;
  setText(ui.lanesSummary, `${shown} · max lag ${stats.lag_max ?? 0}`);
}

function renderLeases(data) {
  const now = data.server_ms || state.serverMs || Date.now();
  const leases = data.leases || [];
  clear(ui.leases);
  if (!leases.length) emptyRow(ui.leases, 5, "No job is active.");
  for (const lease of leases) {
    const overdue = lease.deadline_ms < now;
    ui.leases.append(el("tr", { dataset: { testid: "lease-row", job: lease.job_id } },
      el("td", { title: lease.job_id }, el("code", {}, shortId(lease.job_id))),
      el("td", { title: lease.lane }, el("code", {}, shortId(lease.lane))),
      el("td", { class: "num" }, lease.attempts),
      el("td", {}, lease.owner || "–"),
      el("td", { class: overdue ? "error-text" : null }, overdue ? `overdue ${formatDuration(now - lease.deadline_ms)}` : formatRelative(lease.deadline_ms, now))));
  }
}

function renderDead(dead, total) {
  clear(ui.dead);
  const count = total ?? dead.length;
  setText(ui.deadSummary, count > dead.length ? `showing ${dead.length} of ${count}` : `${count}`);
  if (!dead.length) emptyRow(ui.dead, 6, "No dead letters.");
  for (const row of dead) {
    ui.dead.append(el("tr", { dataset: { testid: "dead-row", job: row.job_id } },
      el("td", { title: row.job_id }, el("code", {}, row.job_id)),
      el("td", { title: row.lane }, el("code", {}, shortId(row.lane))),
      el("td", {}, formatClock(row.dead_ms)),
      el("td", { class: "num" }, row.tries),
      el("td", { class: "wrap error-text" }, row.error || "–"),
      el("td", {}, el("button", { type: "button", class: "small", dataset: { testid: "dead-retry", job: row.job_id } }, "Retry"))));
  }
}

async function onDeadClick(event) {
  const button = event.target.closest('[data-testid="dead-retry"]');
  if (!button) return;
  const id = button.dataset.job;
  button.disabled = true;
  try {
    const result = await call("POST", `/api/operator/dead/${encodeURIComponent(id)}/retry`);
    const text = result.retried ? `${result.job_id} retried: it is back on its lane.` : `${result.job_id} was not dead: nothing to retry.`;
    showMessage(ui.message, text, result.retried ? "ok" : "warn");
  } catch (err) {
    showMessage(ui.message, friendlyError(err), "error");
    button.disabled = false;
  }
  if (state.timer) state.timer.now();
}

// ---------------------------------------------------------------------------------------------
// The throughput chart (inline SVG, no library)

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

/** A round axis maximum: 1, 2, 5 × 10^k at or above the value. */
function niceMax(value) {
  if (value <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((m) => m >= value);
}

function chartScales(nowMs, yMax) {
  const { width, height, left, right, top, bottom, windowMs } = CHART;
  return {
    x: (ms) => left + ((ms - (nowMs - windowMs)) / windowMs) * (width - left - right),
    y: (v) => height - bottom - (v / yMax) * (height - top - bottom),
  };
}

function drawAxes(root, scale, nowMs, yMax, intervalS) {
  const { width, height, left, right, top, bottom } = CHART;
  for (const v of [0, yMax / 2, yMax]) {
    const y = scale.y(v);
    root.append(svg("line", { class: "grid-line", x1: left, x2: width - right, y1: y, y2: y }));
    root.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const step = width < 480 ? 5 : 2; // minutes between x labels
  for (let m = 10; m >= 0; m -= step) {
    const x = scale.x(nowMs - m * 60_000);
    root.append(svg("line", { class: "axis", x1: x, x2: x, y1: height - bottom, y2: height - bottom + 4 }));
    root.append(svg("text", { x, y: height - bottom + 16, "text-anchor": "middle" }, m ? `−${m} min` : "now"));
  }
  root.append(svg("line", { class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));
  root.append(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: height - bottom }));
  root.append(svg("text", { x: 12, y: (top + height - bottom) / 2, transform: `rotate(-90 12 ${(top + height - bottom) / 2})`, "text-anchor": "middle" }, `jobs / ${intervalS} s`));
}

function drawSeries(root, scale, samples, field) {
  if (!samples.length) return;
  const points = samples.map((s) => `${scale.x(s.at_ms).toFixed(1)},${scale.y(s[field] || 0).toFixed(1)}`).join(" ");
  root.append(svg("polyline", { class: field, points }));
}

function renderChart(data, serverMs) {
  state.lastChart = [data, serverMs];
  const intervalS = (data && data.interval_s) || 5;
  const all = (data && data.samples) || [];
  const nowMs = Math.max(serverMs || 0, ...all.map((s) => s.at_ms));
  const samples = all.filter((s) => s.at_ms >= nowMs - CHART.windowMs).sort((a, b) => a.at_ms - b.at_ms);
  const yMax = niceMax(Math.max(1, ...samples.map((s) => Math.max(s.completed || 0, s.admitted || 0))));
  // the viewBox is the chart's own pixel width, so labels keep their size on a phone
  CHART.width = Math.max(280, Math.round(ui.chart.getBoundingClientRect().width) || 640);
  ui.chart.setAttribute("viewBox", `0 0 ${CHART.width} ${CHART.height}`);
  const scale = chartScales(nowMs, yMax);
  clear(ui.chart);
  ui.chart.append(svg("title", {}, "Jobs completed and admitted per interval, last 10 minutes"));
  drawAxes(ui.chart, scale, nowMs, yMax, intervalS);
  drawSeries(ui.chart, scale, samples, "admitted");
  drawSeries(ui.chart, scale, samples, "completed");
  if (!samples.length) {
    ui.chart.append(svg("text", { x: CHART.width / 2, y: CHART.height / 2, "text-anchor": "middle" }, "no samples yet"));
  }
  renderRate(samples, intervalS);
}

function renderRate(samples, intervalS) {
  const last = samples[samples.length - 1];
  if (!last) return setText(ui.rate, "");
  const total = samples.reduce((sum, s) => sum + (s.completed || 0), 0);
  return setText(ui.rate, `${((last.completed || 0) / intervalS).toFixed(1)} completed/s now · ${total} in 10 min`);
}

// ---------------------------------------------------------------------------------------------
// Boot

const rounds = roundControl({
  call,
  token: () => state.token,
  refreshSoon: () => state.timer && state.timer.now(),
  message: ui.message,
});

function boot() {
  ui.formEl.addEventListener("submit", onSave);
  ui.forget.addEventListener("click", () => showForm(""));
  ui.dead.addEventListener("click", onDeadClick);
  window.addEventListener("resize", () => state.lastChart && renderChart(...state.lastChart));
  window.addEventListener("hashchange", () => {
    const token = readToken();
    if (token && token !== state.token) start(token);
  });
  const token = readToken();
  if (token) start(token);
  else showForm("");
}

boot();
