// Codemojex · Proof page: the seed's interactive, on the proof's own demo bus, round and worker process.
//
// Uses the Play page's session (or joins as "proof-xxxx"): the player plays as their demo player, in the
// worthless demo currency, on the demo round (GET /api/proof names it), so nothing here costs or grants
// anything in the real game. Watches the demo worker (an opaque instance tag that changes on a restart: the
// host shows players no pid) every second, and one picked demo job (GET /api/proof/jobs/{id}: every 300 ms
// while it moves, else every 2 s). The crash button works only where the host turned it on (--proof-crash).
// Three actions try to break exactly-once: resubmit the same job (a duplicate, nothing charged), crash the
// worker after the effect and before the acknowledgement (the lease expires, the sweep returns the job, the
// re-claim under token 2 is a no-op), and a stale finisher (refused). The scored count must stay 1.

import {
  api, ApiError, getSession, clearSession, join, randomLetters,
  el, clear, setText, byTestId, showMessage, friendlyError,
  formatClockMs, formatDuration, formatRelative, shortId, every,
} from "/static/common.js";

const FINAL = new Set(["done", "dead"]);
const STEPS = ["submitted", "claimed", "effect", "killed", "lease", "swept", "reclaimed", "noop"];
const FAST_MS = 300;
const SLOW_MS = 2000;

const ui = {
  message: byTestId("message"),
  off: byTestId("proof-off"),
  crashOff: byTestId("proof-crash-off"),
  playerName: byTestId("player-name"),
  rejoin: byTestId("proof-rejoin"),
  roundId: byTestId("round-id"),
  workerInstance: byTestId("worker-instance"),
  workerRestarts: byTestId("worker-restarts"),
  workerAlive: byTestId("worker-alive"),
  newJob: byTestId("proof-new"),
  pick: byTestId("proof-pick"),
  resubmit: byTestId("proof-resubmit"),
  crash: byTestId("proof-crash"),
  stale: byTestId("proof-stale"),
  countBox: document.getElementById("count-box"),
  scored: byTestId("scored-count"),
  jobId: byTestId("job-id"),
  jobState: byTestId("job-state"),
  jobLocation: byTestId("job-location"),
  jobToken: byTestId("job-token"),
  jobDeadline: byTestId("job-deadline"),
  jobTries: byTestId("job-tries"),
  steps: byTestId("proof-steps"),
  stepsNote: document.getElementById("steps-note"),
  log: byTestId("proof-log"),
};

const state = {
  session: null,
  enabled: null,
  crashEnabled: null,
  worker: null,
  round: null,
  jobs: [],
  picked: null,
  job: null,
  busy: false,
  movingUntil: 0,
  restartsSeen: 0, // worker restarts this page has watched
  crash: null, // {job, instance, done: Set of steps}
  joining: null,
};

let jobTimer = null;

// ---------------------------------------------------------------------------------------------
// The timeline

function log(text, kind = "info") {
  const nearBottom = ui.log.scrollHeight - ui.log.scrollTop - ui.log.clientHeight < 40;
  const now = Date.now();
  ui.log.append(el("li", { dataset: { kind } },
    el("time", { datetime: new Date(now).toISOString() }, formatClockMs(now)),
    el("span", {}, text)));
  if (nearBottom) ui.log.scrollTop = ui.log.scrollHeight;
}

function report(text, kind = "ok") {
  showMessage(ui.message, text, kind === "error" ? "error" : kind === "warn" ? "warn" : "ok");
  log(text, kind);
}

// ---------------------------------------------------------------------------------------------
// Session and calls

async function ensureSession() {
  state.session = state.session || getSession();
  if (state.session) return state.session;
  if (!state.joining) {
    const name = `proof-${randomLetters(4)}`;
    state.joining = join(name)
      .then(({ session }) => {
        log(`joined as ${session.name} (${session.player_id})`);
        return session;
      })
      .finally(() => { state.joining = null; });
  }
  state.session = await state.joining;
  renderSession();
  return state.session;
}

/** A player call; a 401 forgets the session so the next call joins afresh. */
async function call(method, path, options = {}) {
  const session = await ensureSession();
  try {
    return await api(method, path, { ...options, token: session.token });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      clearSession();
      state.session = null;
      log("the session was refused (401): joining again as a new proof player", "warn");
    }
    if (err instanceof ApiError && err.status === 403 && err.code === "forbidden") setEnabled(false);
    if (err instanceof ApiError && err.code === "proof_crash_off") setCrashEnabled(false);
    throw err;
  }
}

function renderSession() {
  setText(ui.playerName, state.session ? state.session.name || state.session.player_id : "–");
}

async function onRejoin() {
  const current = state.session || getSession();
  const warning = `Forget ${current ? current.name || "this player" : "this player"} in this browser (the Play page too) and`
    + " join as a new proof player? Without its recovery code the player cannot be reached again.";
  if (current && !window.confirm(warning)) return;
  clearSession();
  state.session = null;
  state.jobs = [];
  try {
    await ensureSession();
    renderPick();
    await refreshJobs();
  } catch (err) {
    report(friendlyError(err), "error");
  }
}

// ---------------------------------------------------------------------------------------------
// The proof switch and the worker

function setEnabled(enabled) {
  state.enabled = enabled;
  ui.off.hidden = enabled !== false;
  renderButtons();
}

function setCrashEnabled(enabled) {
  state.crashEnabled = enabled;
  ui.crashOff.hidden = enabled !== false || state.enabled === false;
  renderButtons();
}

async function refreshProof() {
  const data = await call("GET", "/api/proof");
  setEnabled(Boolean(data && data.enabled));
  setCrashEnabled(Boolean(data && data.crash));
  state.round = data && data.round_id ? data.round_id : null;
  setText(ui.roundId, state.round || (state.enabled ? "no demo round is open (codemojex serve opens one)" : "–"));
  const activeKey = document.querySelector('[data-testid="active-key"]');
  if (activeKey && data && data.tag) activeKey.textContent = `emq:{${data.tag}}:active`;
  observeWorker((data && data.worker) || null);
}

function observeWorker(worker) {
  const before = state.worker;
  state.worker = worker;
  const restarted = Boolean(before && worker && before.instance !== worker.instance);
  if (restarted) state.restartsSeen += 1;
  setText(ui.workerInstance, worker ? worker.instance ?? "–" : "–");
  setText(ui.workerRestarts, worker ? String(state.restartsSeen) : "–");
  const alive = worker ? (worker.alive ? "alive" : "down") : "none";
  setText(ui.workerAlive, worker ? alive : "no worker");
  ui.workerAlive.dataset.state = worker ? (worker.alive ? "done" : "dead") : "none";
  if (!before || !worker) return;
  if (restarted) {
    const why = state.crash && !state.crash.done.has("killed") ? ": the worker died by SIGKILL before acknowledging" : "";
    log(`score worker restarted: instance ${before.instance} → ${worker.instance}${why}`, "worker");
    if (state.crash) markStep("killed");
  } else if (before.alive && !worker.alive) {
    log(`score worker ${worker.instance} is down`, "worker");
  }
}

// ---------------------------------------------------------------------------------------------
// The round and the job picker

async function refreshJobs() {
  if (state.enabled === false) return;
  const data = await call("GET", "/api/proof/jobs");
  state.jobs = [...(data.guesses || [])].reverse();
  renderPick();
}

function optionLabel(g) {
  const guess = (g.guess || []).join("");
  return `${shortId(g.job_id)} · ${g.state}${g.attempt ? ` · #${g.attempt}` : ""} · ${guess}`;
}

function renderPick() {
  const ids = state.jobs.map((g) => g.job_id);
  if (state.picked && !ids.includes(state.picked)) ids.unshift(state.picked);
  const wanted = ["", ...ids].join(",");
  const labels = new Map(state.jobs.map((g) => [g.job_id, optionLabel(g)]));
  if (ui.pick.dataset.ids !== wanted) {
    clear(ui.pick);
    ui.pick.append(el("option", { value: "" }, ids.length ? "(pick a job)" : "(no jobs yet: submit one)"));
    ids.forEach((id) => ui.pick.append(el("option", { value: id }, labels.get(id) || shortId(id))));
    ui.pick.dataset.ids = wanted;
  } else {
    [...ui.pick.options].forEach((option) => {
      if (option.value && labels.has(option.value)) setText(option, labels.get(option.value));
    });
  }
  ui.pick.value = state.picked || "";
}

function pick(jobId, why) {
  if (!jobId || jobId === state.picked) return;
  state.picked = jobId;
  state.job = null;
  if (!state.crash || state.crash.job !== jobId) resetSteps();
  log(`picked ${jobId}${why ? ` (${why})` : ""}`);
  renderPick();
  renderJob();
  renderButtons();
  moving();
}

function onPickChange() {
  if (ui.pick.value) pick(ui.pick.value, "from the list");
}

// ---------------------------------------------------------------------------------------------
// The job panel

/** Poll fast for a few seconds (an action just happened). */
function moving(ms = 4000) {
  state.movingUntil = Math.max(state.movingUntil, Date.now() + ms);
  if (jobTimer) {
    jobTimer.set(FAST_MS);
    jobTimer.now();
  }
}

function isMoving() {
  if (!state.picked) return false;
  if (Date.now() < state.movingUntil) return true;
  if (state.crash && !state.crash.done.has("noop")) return true;
  return !state.job || !FINAL.has(state.job.state);
}

async function refreshJob() {
  if (state.picked) {
    const id = state.picked;
    try {
      const job = await call("GET", `/api/proof/jobs/${encodeURIComponent(id)}`);
      if (id === state.picked) observeJob(job);
    } catch (err) {
      if (err instanceof ApiError && err.code === "unknown_job") setText(ui.jobState, "unknown");
      else throw err;
    }
  }
  jobTimer.set(isMoving() ? FAST_MS : SLOW_MS);
}

function observeJob(job) {
  const before = state.job;
  state.job = job;
  state.job.received = Date.now();
  if (!before) {
    log(`${shortId(job.job_id)} is ${job.state} at ${job.location} under token ${job.attempts}; scored count ${job.scored_count}`);
  } else {
    logChanges(before, job);
  }
  if (state.crash && state.crash.job === job.job_id) narrate(before, job);
  renderJob();
}

function logChanges(before, job) {
  if (before.state !== job.state) log(`state ${before.state} → ${job.state}`);
  if (before.location !== job.location) log(`location ${before.location} → ${job.location}`);
  if (before.attempts !== job.attempts) log(`attempts token ${before.attempts} → ${job.attempts}`);
  if (before.scored_count !== job.scored_count) {
    log(`scored count ${before.scored_count} → ${job.scored_count}`, job.scored_count > 1 ? "error" : "ok");
  }
}

function renderJob() {
  const job = state.job;
  setText(ui.jobId, state.picked || "–");
  setText(ui.jobState, job ? job.state : "–");
  ui.jobState.dataset.state = job ? job.state : "none";
  setText(ui.jobLocation, job ? job.location || "–" : "–");
  setText(ui.jobToken, job ? job.attempts ?? "–" : "–");
  setText(ui.jobTries, job ? `${job.tries ?? "–"}${job.max_attempts ? ` of ${job.max_attempts}` : ""}` : "–");
  setText(ui.scored, job ? String(job.scored_count ?? 0) : "–");
  ui.countBox.dataset.bad = job && job.scored_count > 1 ? "1" : "0";
  renderDeadline();
}

function renderDeadline() {
  const job = state.job;
  if (!job || job.state !== "active" || !job.deadline_ms) {
    setText(ui.jobDeadline, "–");
    return;
  }
  const now = job.server_ms + (Date.now() - job.received);
  const left = job.deadline_ms - now;
  setText(ui.jobDeadline, left >= 0 ? formatRelative(job.deadline_ms, now) : `passed ${formatDuration(left)} ago: the sweep will return it`);
}

// ---------------------------------------------------------------------------------------------
// The crash narration

function resetSteps() {
  state.crash = null;
  ui.steps.querySelectorAll("li").forEach((li) => {
    li.dataset.done = "0";
    li.dataset.current = "0";
  });
  setText(ui.stepsNote, "Press “Crash the worker mid-job” to watch it happen.");
}

/** Mark a step done, and every step before it (a later step proves the earlier ones happened). */
function markStep(step) {
  if (!state.crash) return;
  const upto = STEPS.indexOf(step);
  STEPS.slice(0, upto + 1).forEach((s) => {
    if (state.crash.done.has(s)) return;
    state.crash.done.add(s);
    if (s !== step) log(`(${stepText(s)}: inferred from the later step)`, "info");
  });
  renderSteps();
}

function stepText(step) {
  const li = ui.steps.querySelector(`[data-step="${step}"]`);
  return li ? li.textContent.replace(/\.$/, "").toLowerCase() : step;
}

function renderSteps() {
  const done = state.crash ? state.crash.done : new Set();
  const current = STEPS.find((s) => !done.has(s));
  ui.steps.querySelectorAll("li").forEach((li) => {
    li.dataset.done = done.has(li.dataset.step) ? "1" : "0";
    li.dataset.current = state.crash && li.dataset.step === current ? "1" : "0";
  });
}

function narrate(before, job) {
  const crash = state.crash;
  const had = (s) => crash.done.has(s);
  if (job.attempts >= 1 && !had("claimed")) narrateOnce("claimed", `claimed: ${job.location} under attempts token ${job.attempts}`);
  if (job.scored_count >= 1 && !had("effect")) narrateOnce("effect", `the effect is written: scored count ${job.scored_count} (not acknowledged yet)`);
  if (job.attempts >= 2 && !had("killed")) narrateOnce("killed", "the first worker must have died: the job was claimed again");
  if (had("killed") && job.state === "active" && job.attempts === 1 && !had("lease")) {
    narrateOnce("lease", `the dead worker's job sits in ${job.location} until its lease deadline (${formatRelative(job.deadline_ms, job.server_ms)})`);
  }
  const returned = (job.state === "queued" || job.state === "delayed") && had("claimed");
  if ((returned || job.attempts >= 2) && !had("swept")) narrateOnce("swept", returned
      ? `the sweep returned the job to its lane (${job.location})`
      : "the sweep returned the job to its lane (and it was claimed again between two polls)");
  if (job.attempts >= 2 && !had("reclaimed")) narrateOnce("reclaimed", `re-claimed under attempts token ${job.attempts}`);
  if (job.state === "done" && job.attempts >= 2 && !had("noop")) finishNarration(job);
  else if (job.state === "done" && job.attempts < 2 && !had("noop")) setText(ui.stepsNote, "It finished without a crash: was the job marked? (see the timeline)");
  else if (job.state === "dead") setText(ui.stepsNote, `The job is dead: ${job.error || "see the Dashboard"}`);
}

function narrateOnce(step, text) {
  markStep(step);
  log(text, step === "killed" ? "worker" : "info");
}

function finishNarration(job) {
  markStep("noop");
  const ok = job.scored_count === 1;
  log(`done: the redelivery ran as a no-op; scored count ${job.scored_count}${ok ? ": exactly once in effect" : " (expected 1!)"}`, ok ? "ok" : "error");
  setText(ui.stepsNote, ok ? "Delivered twice, scored once." : `Scored ${job.scored_count} times: the proof failed.`);
}

// ---------------------------------------------------------------------------------------------
// Actions

function renderButtons() {
  const off = state.enabled === false || state.busy;
  ui.newJob.disabled = off;
  ui.crash.disabled = off || state.crashEnabled === false;
  ui.resubmit.disabled = off || !state.picked;
  ui.stale.disabled = off || !state.picked;
}

async function act(label, fn) {
  if (state.busy) return;
  state.busy = true;
  renderButtons();
  log(label, "action");
  try {
    await fn();
  } catch (err) {
    report(friendlyError(err), "error");
  } finally {
    state.busy = false;
    renderButtons();
    moving();
    refreshJobs().catch(() => {});
  }
}

const chargedText = (charged) => (charged ? `${charged.amount} ${charged.currency}${charged.amount === 1 ? "" : "s"}` : "nothing");

function onNew() {
  act("submit a new guess job", async () => {
    const result = await call("POST", "/api/proof/jobs", { body: { crash: false } });
    report(`${result.status}: ${result.job_id}, charged ${chargedText(result.charged)}, guess ${(result.guess || []).join("")}`);
    pick(result.job_id, "new");
  });
}

async function balances() {
  try {
    const mine = await call("GET", "/api/proof/jobs");
    return mine.balances || {};
  } catch {
    return null;
  }
}

const balancesText = (b) => Object.entries(b).map(([c, n]) => `${n} ${c}`).join(", ");

function onResubmit() {
  const id = state.picked;
  act(`resubmit ${shortId(id)}`, async () => {
    const before = await balances();
    const result = await call("POST", `/api/proof/jobs/${encodeURIComponent(id)}/resubmit`);
    const after = await balances();
    const same = result.job_id === id;
    const unchanged = before && after && balancesText(before) === balancesText(after);
    if (result.status === "duplicate" && same) report("duplicate: nothing charged, same job");
    else report(`unexpected: ${result.status} for ${result.job_id}`, "error");
    if (before && after) log(`wallet ${balancesText(before)} → ${balancesText(after)}${unchanged ? " (unchanged)" : ""}`, unchanged ? "ok" : "error");
  });
}

function onCrash() {
  act("submit a new guess job marked to crash the worker", async () => {
    const worker = state.worker || {};
    const result = await call("POST", "/api/proof/jobs", { body: { crash: true } });
    report(`${result.status}: ${result.job_id} is marked: its worker will write the effect, then die by SIGKILL before acknowledging`, "warn");
    state.crash = { job: result.job_id, instance: worker.instance, done: new Set() };
    pick(result.job_id, "marked for the crash");
    markStep("submitted");
    setText(ui.stepsNote, "Watching… the lease has to expire before the sweep can return the job.");
  });
}

function onStale() {
  const id = state.picked;
  act(`race a stale finisher against ${shortId(id)}`, async () => {
    const r = await call("POST", `/api/proof/jobs/${encodeURIComponent(id)}/stale`);
    const text = `stale finisher holding token ${r.token_used} refused (${r.outcome}); job stays ${r.state} under token ${r.token_current}`;
    report(text, r.outcome === "stale" ? "ok" : "error");
  });
}

// ---------------------------------------------------------------------------------------------
// Boot

async function boot() {
  ui.newJob.addEventListener("click", onNew);
  ui.resubmit.addEventListener("click", onResubmit);
  ui.crash.addEventListener("click", onCrash);
  ui.stale.addEventListener("click", onStale);
  ui.pick.addEventListener("change", onPickChange);
  ui.rejoin.addEventListener("click", onRejoin);
  renderButtons();
  try {
    await ensureSession();
    renderSession();
  } catch (err) {
    report(`could not join: ${friendlyError(err)}`, "error");
  }
  every(1000, refreshProof).now();
  every(2000, refreshJobs).now();
  jobTimer = every(SLOW_MS, refreshJob);
  every(250, renderDeadline);
}

boot();
