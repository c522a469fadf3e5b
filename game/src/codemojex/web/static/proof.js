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
//
// This module keeps the state, the calls, the polling and the wiring; the parts are proof_view.js
// (timeline, job picker, job panel, buttons), proof_steps.js (the crash narration) and
// proof_actions.js (the three actions), each given the state, the page's elements and callbacks here.

import {
  api, ApiError, getSession, clearSession, join, randomLetters, setText, byTestId, friendlyError, shortId, every,
} from "/static/common.js";
import { createTimeline, renderPick, renderJob, renderDeadline, renderButtons } from "/static/proof_view.js";
import { createNarration } from "/static/proof_steps.js";
import { createActions } from "/static/proof_actions.js";

const FINAL = new Set(["done", "dead"]);
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

const { log, report } = createTimeline(ui);
const { resetSteps, markStep, narrate } = createNarration({ state, ui, log });
const actions = createActions({
  state, ui, call: (...args) => call(...args), log, report, pick: (jobId, why) => pick(jobId, why), markStep,
  moving: () => moving(), refreshJobs: () => refreshJobs(),
});

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
    renderPick(ui, state);
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
  renderButtons(ui, state);
}

function setCrashEnabled(enabled) {
  state.crashEnabled = enabled;
  ui.crashOff.hidden = enabled !== false || state.enabled === false;
  renderButtons(ui, state);
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
  renderPick(ui, state);
}

function pick(jobId, why) {
  if (!jobId || jobId === state.picked) return;
  state.picked = jobId;
  state.job = null;
  if (!state.crash || state.crash.job !== jobId) resetSteps();
  log(`picked ${jobId}${why ? ` (${why})` : ""}`);
  renderPick(ui, state);
  renderJob(ui, state);
  renderButtons(ui, state);
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
  renderJob(ui, state);
}

function logChanges(before, job) {
  if (before.state !== job.state) log(`state ${before.state} → ${job.state}`);
  if (before.location !== job.location) log(`location ${before.location} → ${job.location}`);
  if (before.attempts !== job.attempts) log(`attempts token ${before.attempts} → ${job.attempts}`);
  if (before.scored_count !== job.scored_count) {
    log(`scored count ${before.scored_count} → ${job.scored_count}`, job.scored_count > 1 ? "error" : "ok");
  }
}

// ---------------------------------------------------------------------------------------------
// Boot

async function boot() {
  actions.wire();
  ui.pick.addEventListener("change", onPickChange);
  ui.rejoin.addEventListener("click", onRejoin);
  renderButtons(ui, state);
  try {
    await ensureSession();
    renderSession();
  } catch (err) {
    report(`could not join: ${friendlyError(err)}`, "error");
  }
  every(1000, refreshProof).now();
  every(2000, refreshJobs).now();
  jobTimer = every(SLOW_MS, refreshJob);
  every(250, () => renderDeadline(ui, state));
}

boot();
