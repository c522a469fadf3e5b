// Codemojex · the Proof page's views (an ES module proof.js imports): the timeline, the job picker, the
// job panel and the action buttons.
//
// Each draws the shared state into the page and changes none of it; server text lands only in
// textContent (common.js el). The timeline keeps to its bottom while the reader has not scrolled up.

import { el, clear, setText, showMessage, formatClockMs, formatDuration, formatRelative, shortId } from "/static/common.js";

/** The timeline in ``ui.log``: log(text, kind) adds a line; report(text, kind) shows it as the message too. */
export function createTimeline(ui) {
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

  return { log, report };
}

function optionLabel(g) {
  const guess = (g.guess || []).join("");
  return `${shortId(g.job_id)} · ${g.state}${g.attempt ? ` · #${g.attempt}` : ""} · ${guess}`;
}

/** The job picker: the player's demo jobs, newest first (and the picked one, even when gone). */
export function renderPick(ui, state) {
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

/** The picked job: its state, location, attempts token, tries, scored count and lease deadline. */
export function renderJob(ui, state) {
  const job = state.job;
  setText(ui.jobId, state.picked || "–");
  setText(ui.jobState, job ? job.state : "–");
  ui.jobState.dataset.state = job ? job.state : "none";
  setText(ui.jobLocation, job ? job.location || "–" : "–");
  setText(ui.jobToken, job ? job.attempts ?? "–" : "–");
  setText(ui.jobTries, job ? `${job.tries ?? "–"}${job.max_attempts ? ` of ${job.max_attempts}` : ""}` : "–");
  setText(ui.scored, job ? String(job.scored_count ?? 0) : "–");
  ui.countBox.dataset.bad = job && job.scored_count > 1 ? "1" : "0";
  renderDeadline(ui, state);
}

/** The active job's lease deadline, counted on the server's clock (redrawn every 250 ms). */
export function renderDeadline(ui, state) {
  const job = state.job;
  if (!job || job.state !== "active" || !job.deadline_ms) {
    setText(ui.jobDeadline, "–");
    return;
  }
  const now = job.server_ms + (Date.now() - job.received);
  const left = job.deadline_ms - now;
  setText(ui.jobDeadline, left >= 0 ? formatRelative(job.deadline_ms, now) : `passed ${formatDuration(left)} ago: the sweep will return it`);
}

/** The actions are off while the proof is off or one runs; resubmit and stale need a picked job. */
export function renderButtons(ui, state) {
  const off = state.enabled === false || state.busy;
  ui.newJob.disabled = off;
  ui.crash.disabled = off || state.crashEnabled === false;
  ui.resubmit.disabled = off || !state.picked;
  ui.stale.disabled = off || !state.picked;
}
