// Codemojex · the Proof page's actions, the three tries to break exactly-once (an ES module proof.js
// builds with createActions).
//
// "Submit a new guess job"; "Resubmit the same job" (a duplicate: the same job, nothing charged, the
// wallet unchanged); "Crash the worker mid-job" (a job marked so its worker writes the effect, then dies
// by SIGKILL before acknowledging: the narration, proof_steps.js, follows its redelivery); "Stale
// finisher" (a finisher holding the old token is refused). One action runs at a time; each is logged.

import { setText, friendlyError, shortId } from "/static/common.js";
import { renderButtons } from "/static/proof_view.js";

/**
 * The actions over ``state`` and ``ui``: ``call`` is the player's API call; log and report write the
 * timeline; pick(jobId, why) picks a job; markStep (proof_steps.js); moving() polls the job fast a
 * while; refreshJobs() (a promise) reloads the picker.
 */
export function createActions({ state, ui, call, log, report, pick, markStep, moving, refreshJobs }) {
  async function act(label, fn) {
    if (state.busy) return;
    state.busy = true;
    renderButtons(ui, state);
    log(label, "action");
    try {
      await fn();
    } catch (err) {
      report(friendlyError(err), "error");
    } finally {
      state.busy = false;
      renderButtons(ui, state);
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

  return {
    wire() {
      ui.newJob.addEventListener("click", onNew);
      ui.resubmit.addEventListener("click", onResubmit);
      ui.crash.addEventListener("click", onCrash);
      ui.stale.addEventListener("click", onStale);
    },
  };
}
