"""The Proof page in a real browser, on the proof's demo bus with real demo worker processes: each of its
three buttons does what it promises, the scored count stays 1, and the player's real wallet is untouched.

Under ``served`` no ``codemojex serve`` supervisor runs the demo worker (``GET /api/proof`` says
``"worker": null``): the tests open the demo round and start and kill demo worker processes themselves,
and the page shows "no worker" for the supervisor's instance and restarts."""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess

import pytest
from playwright.sync_api import expect

from codemojex.proof import demo_tag
from tests.support.web import demo_round, stop_worker, worker_process

pytestmark = pytest.mark.browser

# Every value the scored-count cell ever shows, recorded in the page from its first paint on.
RECORD_SCORED_COUNTS = """
window.__scoredCounts = [];
document.addEventListener("DOMContentLoaded", () => {
  const cell = document.querySelector('[data-testid="scored-count"]');
  window.__scoredCounts.push(cell.textContent);
  new MutationObserver(() => window.__scoredCounts.push(cell.textContent))
    .observe(cell, {childList: true, characterData: true, subtree: true});
});
"""


def open_proof(page, round_id):
    page.goto("/proof")
    expect(page.get_by_test_id("player-name"), "the page joins as a proof player").to_have_text(
        re.compile(r"^proof-[a-z]{4}$")
    )
    expect(page.get_by_test_id("round-id")).to_have_text(round_id)
    expect(page.get_by_test_id("worker-alive"), "no supervisor here: the page says so").to_have_text(
        "no worker"
    )
    expect(page.get_by_test_id("proof-off")).to_be_hidden()


def picked_job(page):
    expect(page.get_by_test_id("job-id")).to_have_text(re.compile(r"^JOB[0-9A-Z]{23}$"))
    return page.get_by_test_id("job-id").text_content()


def player(served, page):
    token = page.evaluate("() => localStorage.getItem('cmx.token')")
    assert token, "the proof page stores the session it joined with"
    return served.client(token)


def real_guess_entries(client):
    """The player's real ledger entries of guesses and proof grants: a proof job makes none."""
    ledger = client.get("/api/wallet").json()["ledger"]
    return [entry for entry in ledger if entry["reason"] in ("guess", "proof_grant")]


def demo_balance(client):
    balances: dict[str, int] = client.get("/api/proof/jobs").json()["balances"]
    return balances


@pytest.fixture
def demo(redis_server, tag, run_in_thread):
    """The demo round's id (opened as ``codemojex serve`` does)."""
    return run_in_thread(demo_round(redis_server.url, tag))


def test_resubmitting_a_job_is_a_duplicate_and_charges_nothing(served, demo, demo_worker, page):
    open_proof(page, demo)
    page.get_by_test_id("proof-new").click()
    expect(page.get_by_test_id("message")).to_contain_text("admitted: JOB")
    job = picked_job(page)
    expect(page.get_by_test_id("job-state"), "the score worker finishes the job").to_have_text("done")
    expect(page.get_by_test_id("scored-count")).to_have_text("1")
    expect(page.get_by_test_id("job-token")).to_have_text("1")

    with player(served, page) as client:
        before = demo_balance(client)
        real = client.get("/api/wallet").json()
        page.get_by_test_id("proof-resubmit").click()
        expect(page.get_by_test_id("message")).to_have_text("duplicate: nothing charged, same job")
        expect(page.get_by_test_id("proof-log")).to_contain_text("(unchanged)")
        expect(page.get_by_test_id("scored-count"), "a duplicate is not scored again").to_have_text("1")
        expect(page.get_by_test_id("job-id")).to_have_text(job)

        after = demo_balance(client)
        assert after == before, f"the resubmission charged the demo wallet: {before} -> {after}"
        assert after == {"proof": 1_000_000 - 1}, "the job is charged exactly once, in the demo currency"
        assert client.get("/api/wallet").json() == real, "the real wallet is untouched"
        assert real_guess_entries(client) == []
        info = client.get(f"/api/proof/jobs/{job}").json()
        assert (info["state"], info["scored_count"]) == ("done", 1)


def test_crashing_the_worker_mid_score_redelivers_the_job_and_counts_it_once(
    served, demo, redis_server, tag, page, screenshot
):
    first = worker_process(redis_server.url, demo_tag(tag), armed=True, lease_ms=1500)
    second = None
    try:
        page.add_init_script(RECORD_SCORED_COUNTS)
        open_proof(page, demo)
        expect(page.get_by_test_id("proof-crash-off"), "the crash button is on for this host").to_be_hidden()
        page.get_by_test_id("proof-crash").click()
        expect(page.get_by_test_id("message")).to_contain_text("is marked")
        job = picked_job(page)

        try:
            returncode = first.wait(30)
        except subprocess.TimeoutExpired:
            pytest.fail("the armed worker did not die within 30 s of the marked job")
        assert returncode == -signal.SIGKILL, f"the worker should kill itself by SIGKILL, got {returncode}"

        # The effect is written, the acknowledgement never came: the job sits in active under token 1.
        expect(page.get_by_test_id("job-state")).to_have_text("active")
        expect(page.get_by_test_id("job-location")).to_have_text(f"emq:{{{demo_tag(tag)}}}:active")
        expect(page.get_by_test_id("job-token")).to_have_text("1")
        expect(page.get_by_test_id("scored-count")).to_have_text("1")
        for step in ("submitted", "claimed", "effect"):
            expect(step_of(page, step), f"the step {step!r} is narrated").to_have_attribute("data-done", "1")

        # A second worker: the lease expires, its sweep returns the job, it re-claims it as a no-op.
        second = worker_process(redis_server.url, demo_tag(tag), armed=True, lease_ms=1500)
        expect(page.get_by_test_id("job-state"), "the redelivery finishes the job").to_have_text("done")
        expect(page.get_by_test_id("job-token"), "re-claimed under the next attempts token").to_have_text("2")
        expect(page.get_by_test_id("scored-count")).to_have_text("1")
        expect(
            page.locator('[data-testid="proof-step"][data-done="1"]'), "every step of the crash is narrated"
        ).to_have_count(8)
        expect(page.locator("#steps-note")).to_have_text("Delivered twice, scored once.")
        expect(page.get_by_test_id("proof-log")).to_contain_text("scored count 1: exactly once in effect")

        seen = page.evaluate("() => window.__scoredCounts")
        assert "1" in seen, f"the scored count never showed 1: {seen}"
        after_effect = seen[seen.index("1") :]
        assert set(after_effect) == {"1"}, f"after the effect the scored count must stay 1, it showed {seen}"

        # The crashed worker's token 1 is stale now: a late finisher holding it is refused.
        page.get_by_test_id("proof-stale").click()
        expect(page.get_by_test_id("message")).to_have_text(
            "stale finisher holding token 1 refused (stale); job stays done under token 2"
        )
        expect(page.get_by_test_id("scored-count")).to_have_text("1")
        screenshot("proof-after-crash")

        with player(served, page) as client:
            info = client.get(f"/api/proof/jobs/{job}").json()
            assert (info["state"], info["attempts"], info["scored_count"]) == ("done", 2, 1)
            assert demo_balance(client) == {"proof": 1_000_000 - 1}, "the redelivered job is charged once"
            assert real_guess_entries(client) == [], "nothing real is charged or granted"
        assert second.poll() is None, "the crash trigger is one-shot: the redelivery must not crash"
    finally:
        for process in (first, second):
            if process is not None:
                stop_worker(process)


def step_of(page, step):
    return page.locator(f'[data-testid="proof-step"][data-step="{step}"]')


def test_a_stale_finisher_needs_an_older_token_and_the_count_stays_1(served, demo, demo_worker, page):
    """On a job delivered once the page explains that no older token exists yet; nothing changes."""
    open_proof(page, demo)
    page.get_by_test_id("proof-new").click()
    job = picked_job(page)
    expect(page.get_by_test_id("job-state")).to_have_text("done")
    expect(page.get_by_test_id("scored-count")).to_have_text("1")

    page.get_by_test_id("proof-stale").click()
    expect(page.get_by_test_id("message")).to_contain_text("no older token exists")
    expect(page.get_by_test_id("proof-log")).to_contain_text("crash a worker mid-score first")
    expect(page.get_by_test_id("scored-count"), "a refused finisher changes nothing").to_have_text("1")
    expect(page.get_by_test_id("job-state")).to_have_text("done")
    with player(served, page) as client:
        info = client.get(f"/api/proof/jobs/{job}").json()
        assert (info["state"], info["scored_count"]) == ("done", 1)


def test_the_page_says_when_the_crash_button_is_off(serve_app, host_config, demo, page):
    """`codemojex serve` keeps the crash button off unless --proof-crash: the page says so, disables it."""
    off = serve_app(dataclasses.replace(host_config, proof_crash=False))
    page.goto(f"{off.url}/proof")
    expect(page.get_by_test_id("round-id")).to_have_text(demo)
    expect(page.get_by_test_id("proof-crash-off")).to_be_visible()
    expect(page.get_by_test_id("proof-crash-off")).to_contain_text("--proof-crash")
    expect(page.get_by_test_id("proof-crash")).to_be_disabled()
    expect(page.get_by_test_id("proof-new")).to_be_enabled()
    page.get_by_test_id("proof-new").click()
    expect(page.get_by_test_id("message")).to_contain_text("admitted: JOB")
