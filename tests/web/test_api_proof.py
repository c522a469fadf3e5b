"""The proof endpoints against real worker processes: a duplicate submit, a worker that really dies between
effect and acknowledgement, and a stale finisher; the scored count stays 1 through all of it."""

from __future__ import annotations

import dataclasses
import signal

import pytest

from echomq import Bus
from tests.support.web import error_code, open_round, run, stop_worker, wait_until, worker_process


def job_of(client, job_id):
    reply = client.get(f"/api/jobs/{job_id}")
    assert reply.status_code == 200
    return reply.json()


def test_a_crashed_worker_redelivers_the_job_and_it_still_counts_once(
    served, operator, join, redis_server, tag
):
    open_round(operator)
    player_id, ada = join()
    first = worker_process(redis_server.url, tag, armed=True, lease_ms=1500)
    second = None
    try:
        reply = ada.post("/api/proof/jobs", json={"crash": True})
        assert reply.status_code == 202
        job = reply.json()["job_id"]
        assert first.wait(30) == -signal.SIGKILL  # the worker really died, by its own SIGKILL
        crashed = job_of(ada, job)
        assert crashed["state"] == "active"  # the effect is written, the acknowledgement never came
        assert crashed["location"] == f"emq:{{{tag}}}:active"
        assert crashed["attempts"] == 1
        assert crashed["scored_count"] == 1
        assert crashed["deadline_ms"] is not None
        second = worker_process(redis_server.url, tag, armed=True, lease_ms=1500)
        done = wait_until(lambda: (j := job_of(ada, job))["state"] == "done" and j, what="the redelivery")
        assert done["attempts"] == 2  # swept back after the lease, re-claimed under the next token
        assert done["scored_count"] == 1  # ... and run as a no-op
        assert second.poll() is None  # the trigger was one-shot: the redelivery did not crash

        stale = ada.post(f"/api/proof/jobs/{job}/stale").json()
        assert stale == {
            "job_id": job,
            "token_used": 1,
            "token_current": 2,
            "outcome": "stale",
            "state": "done",
        }
        again = ada.post(f"/api/proof/jobs/{job}/resubmit")
        assert again.status_code == 202
        assert again.json()["status"] == "duplicate"
        assert again.json()["job_id"] == job
        assert job_of(ada, job)["scored_count"] == 1
        guesses = ada.get(f"/api/rounds/{done_round(ada)}/guesses").json()["guesses"]
        assert [g["job_id"] for g in guesses] == [job]
        assert guesses[0]["attempt"] == 1
        ledger = [e for e in ada.get("/api/wallet").json()["ledger"] if e["reason"] == "guess"]
        assert [e["job_id"] for e in ledger] == [job]  # charged once
        stats = operator.get("/api/operator/stats").json()["counters"]
        assert stats["reclaimed"] == 1
        assert stats["completed"] == 1
        assert stats["stale"] >= 1
        assert player_id
    finally:
        for process in (first, second):
            if process is not None:
                stop_worker(process)


def done_round(client) -> str:
    return client.get("/api/rounds/current").json()["round_id"]


def test_a_plain_proof_job_has_no_stale_token_to_offer(served, operator, join, score_worker):
    """A job delivered once has no older token: the stale finisher is refused with 409, nothing changes."""
    open_round(operator)
    _, ada = join()
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]
    done = wait_until(lambda: (j := job_of(ada, job))["state"] == "done" and j, what="the job being scored")
    assert (done["attempts"], done["scored_count"]) == (1, 1)
    answer = ada.post(f"/api/proof/jobs/{job}/stale")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "no_stale_token")
    after = job_of(ada, job)
    assert (after["state"], after["attempts"], after["scored_count"]) == ("done", 1, 1)


def test_a_proof_player_who_cannot_pay_is_credited_the_price(served, operator, join):
    open_round(operator, prices=[{"currency": "gem", "amount": 2}])
    _, ada = join()
    reply = ada.post("/api/proof/jobs", json={})
    assert reply.status_code == 202
    assert reply.json()["charged"] == {"currency": "gem", "amount": 2}
    reasons = [
        (e["reason"], e["delta"]) for e in ada.get("/api/wallet").json()["ledger"] if e["currency"] == "gem"
    ]
    assert reasons == [("proof_grant", 2), ("guess", -2)]


def test_proof_jobs_are_the_callers_own(served, operator, join):
    open_round(operator)
    _, ada = join("Ada")
    _, bob = join("Bob")
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]
    for action in ("resubmit", "stale"):
        reply = bob.post(f"/api/proof/jobs/{job}/{action}")
        assert (reply.status_code, error_code(reply)) == (404, "unknown_job")


def test_without_a_round_a_proof_job_is_404(served, join):
    _, ada = join()
    reply = ada.post("/api/proof/jobs", json={"crash": True})
    assert (reply.status_code, error_code(reply)) == (404, "no_open_round")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/proof/jobs"),
        ("POST", "/api/proof/jobs/JOB00000000000000000000000/resubmit"),
        ("POST", "/api/proof/jobs/JOB00000000000000000000000/stale"),
    ],
)
def test_with_the_proof_off_its_endpoints_are_403(serve_app, host_config, join, method, path):
    served = serve_app(dataclasses.replace(host_config, proof=False))
    _, ada = join(on=served)
    reply = ada.request(method, path, json={})
    assert (reply.status_code, error_code(reply)) == (403, "forbidden")
    with served.client() as anon:
        assert anon.get("/api/proof").json() == {"enabled": False, "tag": host_config.tag, "worker": None}


def test_a_job_on_its_first_delivery_has_no_stale_token_to_race(served, operator, join, redis_server, tag):
    """Its only token is the live one, which would finish it unscored: the host refuses to race it."""
    open_round(operator)
    _, ada = join()
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]

    async def claim():
        async with Bus.from_url(redis_server.url, tag) as bus:
            return await bus.claim(1, lease_ms=60_000)

    [held] = run(claim())
    assert held.job == job
    reply = ada.post(f"/api/proof/jobs/{job}/stale")
    assert (reply.status_code, error_code(reply)) == (409, "no_stale_token")
    still = job_of(ada, job)
    assert (still["state"], still["attempts"], still["scored_count"]) == ("active", 1, 0)
