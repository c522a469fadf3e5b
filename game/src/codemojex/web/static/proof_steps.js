// Codemojex · the Proof page's crash narration (an ES module proof.js builds with createNarration).
//
// After "Crash the worker mid-job", each poll of the marked job (and each worker restart) ticks off the
// steps of its redelivery: submitted, claimed, the effect written, the worker killed, the lease
// expiring, the sweep returning the job, the re-claim under token 2, and the re-run as a no-op. A later
// step proves the earlier ones happened (marked as inferred when no poll saw them). The scored count
// must end at 1.

import { setText, formatRelative } from "/static/common.js";

const STEPS = ["submitted", "claimed", "effect", "killed", "lease", "swept", "reclaimed", "noop"];

/** The narration over ``state`` (its ``crash``) and ``ui`` (steps, stepsNote); ``log`` writes the timeline. */
export function createNarration({ state, ui, log }) {
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

  return { resetSteps, markStep, narrate };
}
