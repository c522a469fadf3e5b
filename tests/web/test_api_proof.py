"""The proof endpoints against real worker processes, on the proof's own demo bus, round and worker: a
duplicate submit, a demo worker that really dies between effect and acknowledgement, and a stale
finisher; the scored count stays 1 through all of it. And the proof is isolated from the real game: it
debits and credits no real wallet, admits nothing on the real bus, writes no key of the live round, its
stale finisher cannot reach a real guess, its crash button is off unless asked for, and it is capped."""

from __future__ import annotations

import dataclasses
import signal

import pytest

from codemojex import proof, proof_retention, rounds
from codemojex.keys import GameKeys
from codemojex.proof import demo_tag
from echomq import Bus
from echomq.keyspace import Keyspace
from tests.support.probe import Probe
from tests.support.web import (
    error_code,
    game_state,
    open_demo_round,
    open_round,
    run,
    stop_worker,
    wait_until,
    worker_process,
)


def job_of(client, job_id):
    reply = client.get(f"/api/proof/jobs/{job_id}")
    assert reply.status_code == 200, reply.text
    return reply.json()


def scored(client, job_id):
    return wait_until(
        lambda: (j := job_of(client, job_id))["state"] == "done" and j, what=f"the proof job {job_id} scored"
    )


def test_a_crashed_demo_worker_redelivers_the_job_and_it_still_counts_once(
    served, operator, join, redis_server, tag
):
    open_round(operator)
    open_demo_round(redis_server.url, tag)
    _, ada = join()
    demo = demo_tag(tag)
    first = worker_process(redis_server.url, demo, armed=True, lease_ms=1500)
    second = None
    try:
        reply = ada.post("/api/proof/jobs", json={"crash": True})
        assert reply.status_code == 202, reply.text
        job = reply.json()["job_id"]
        assert reply.json()["charged"] == {"currency": "proof", "amount": 1}  # the demo currency
        assert first.wait(30) == -signal.SIGKILL  # the demo worker really died, by its own SIGKILL
        crashed = job_of(ada, job)
        assert crashed["state"] == "active"  # the effect is written, the acknowledgement never came
        assert crashed["location"] == f"emq:{{{demo}}}:active"
        assert (crashed["attempts"], crashed["scored_count"]) == (1, 1)
        second = worker_process(redis_server.url, demo, armed=True, lease_ms=1500)
        done = scored(ada, job)
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
        assert (again.status_code, again.json()["status"], again.json()["job_id"]) == (202, "duplicate", job)
        assert job_of(ada, job)["scored_count"] == 1
        mine = ada.get("/api/proof/jobs").json()
        assert [g["job_id"] for g in mine["guesses"]] == [job]
        assert mine["guesses"][0]["attempt"] == 1
        assert mine["balances"] == {"proof": 1_000_000 - 1}  # charged once, in the demo currency
        # The real bus saw none of it.
        counters = operator.get("/api/operator/stats").json()["counters"]
        assert (counters["admitted"], counters["reclaimed"], counters["completed"]) == (0, 0, 0)
    finally:
        for process in (first, second):
            if process is not None:
                stop_worker(process)


def test_a_player_with_an_empty_wallet_gets_nothing_on_the_live_round_through_the_proof(
    served, operator, join, redis_server, sync_redis, tag, score_worker, demo_worker
):
    """The attack: the proof used to credit the price (``proof_grant``) and score the guess on the live
    round's secret. Now the live round's keys, the real bus's jobs and the real wallet stay untouched."""
    live = open_round(operator, prices=[{"currency": "gem", "amount": 2}])  # the player holds no gem
    open_demo_round(redis_server.url, tag)
    player_id, ada = join()
    wallet_before = ada.get("/api/wallet").json()
    game_keys = Probe(sync_redis, GameKeys(tag))  # type: ignore[arg-type]
    before = game_state(game_keys.snapshot())
    jobs = []
    for _ in range(5):
        reply = ada.post("/api/proof/jobs", json={})
        assert reply.status_code == 202, reply.text
        jobs.append(reply.json()["job_id"])
        assert scored(ada, jobs[-1])["scored_count"] == 1  # scored, on the demo round
    assert ada.get("/api/wallet").json() == wallet_before  # no proof_grant, no guess debit
    assert game_state(game_keys.snapshot()) == before  # not one key of the real game changed
    assert not list(sync_redis.scan_iter(match=f"{Keyspace(tag).prefix}job:*"))  # nothing on the real bus
    mine = ada.get(f"/api/rounds/{live['round_id']}/guesses").json()["guesses"]
    assert mine == []
    board = ada.get(f"/api/rounds/{live['round_id']}/leaderboard").json()["entries"]
    assert board == []
    for job in jobs:  # a proof job is no job of the real bus
        assert (ada.get(f"/api/jobs/{job}").status_code, player_id) == (404, player_id)


def test_the_stale_finisher_cannot_reach_a_real_guess(served, operator, join, redis_server, tag):
    """A real guess held by a real worker (its first and only token) is no proof job: 404, untouched."""
    live = open_round(operator)
    open_demo_round(redis_server.url, tag)
    _, ada = join()
    job = ada.post(f"/api/rounds/{live['round_id']}/guesses", json={"guess": live["keyboard"][:6]})
    job_id = job.json()["job_id"]

    async def claim():
        async with Bus.from_url(redis_server.url, tag) as bus:
            return await bus.claim(1, lease_ms=60_000)

    [held] = run(claim())
    assert held.job == job_id
    for action in ("stale", "resubmit"):
        reply = ada.post(f"/api/proof/jobs/{job_id}/{action}")
        assert (reply.status_code, error_code(reply)) == (404, "unknown_job")
    still = ada.get(f"/api/jobs/{job_id}").json()
    assert (still["state"], still["attempts"], still["scored_count"]) == ("active", 1, 0)


def test_with_the_crash_button_off_a_crash_is_403_and_admits_nothing(
    serve_app, host_config, redis_server, sync_redis, tag, join
):
    served = serve_app(dataclasses.replace(host_config, proof_crash=False))
    open_demo_round(redis_server.url, tag)
    _, ada = join(on=served)
    reply = ada.post("/api/proof/jobs", json={"crash": True})
    assert (reply.status_code, error_code(reply)) == (403, "proof_crash_off")
    assert reply.json()["error"]["status"] == 403
    assert not list(sync_redis.scan_iter(match=f"{Keyspace(demo_tag(tag)).prefix}job:*"))
    assert not list(sync_redis.scan_iter(match=f"cmx:{{{demo_tag(tag)}}}:fault:*"))
    with served.client() as anon:
        shown = anon.get("/api/proof").json()
    assert (shown["enabled"], shown["crash"]) == (True, False)
    assert ada.post("/api/proof/jobs", json={}).status_code == 202  # the rest of the proof works


def test_proof_jobs_are_capped_per_caller_and_in_total_with_429(
    serve_app, host_config, redis_server, tag, join
):
    """No demo worker runs, so the jobs stay pending: the caps answer 429 ``proof_cap``, problem JSON."""
    served = serve_app(dataclasses.replace(host_config, proof_caller_cap=2, proof_total_cap=3))
    open_demo_round(redis_server.url, tag)
    _, ada = join("Ada", on=served)
    _, bob = join("Bob", on=served)
    assert [ada.post("/api/proof/jobs", json={}).status_code for _ in range(2)] == [202, 202]
    mine = ada.post("/api/proof/jobs", json={})
    assert mine.status_code == 429
    assert mine.json() == {
        "error": {"code": "proof_cap", "message": mine.json()["error"]["message"], "status": 429}
    }
    assert "waiting" in mine.json()["error"]["message"]
    assert bob.post("/api/proof/jobs", json={}).status_code == 202  # the third pending job in total
    total = bob.post("/api/proof/jobs", json={})
    assert (total.status_code, error_code(total)) == (429, "proof_cap")
    assert "the proof has the most jobs" in total.json()["error"]["message"]
    assert len(ada.get("/api/proof/jobs").json()["guesses"]) == 2
    assert len(bob.get("/api/proof/jobs").json()["guesses"]) == 1


def test_a_plain_proof_job_has_no_stale_token_to_offer(served, join, redis_server, tag, demo_worker):
    """A job delivered once has no older token: the stale finisher is refused with 409, nothing changes."""
    open_demo_round(redis_server.url, tag)
    _, ada = join()
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]
    done = scored(ada, job)
    assert (done["attempts"], done["scored_count"]) == (1, 1)
    answer = ada.post(f"/api/proof/jobs/{job}/stale")
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "no_stale_token")
    after = job_of(ada, job)
    assert (after["state"], after["attempts"], after["scored_count"]) == ("done", 1, 1)


def test_proof_jobs_are_the_callers_own(served, join, redis_server, tag):
    open_demo_round(redis_server.url, tag)
    _, ada = join("Ada")
    _, bob = join("Bob")
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]
    for action in ("resubmit", "stale"):
        reply = bob.post(f"/api/proof/jobs/{job}/{action}")
        assert (reply.status_code, error_code(reply)) == (404, "unknown_job")
    assert (bob.get(f"/api/proof/jobs/{job}").status_code, bob.get("/api/proof/jobs").json()["guesses"]) == (
        404,
        [],
    )


def test_without_a_demo_round_a_proof_job_is_404(served, operator, join):
    open_round(operator)  # a live round is no demo round
    _, ada = join()
    reply = ada.post("/api/proof/jobs", json={})
    assert (reply.status_code, error_code(reply)) == (404, "no_open_round")


def test_the_status_shows_the_demo_bus_and_round(served, anon, redis_server, tag):
    demo_round = open_demo_round(redis_server.url, tag)
    shown = anon.get("/api/proof").json()
    assert shown == {
        "enabled": True,
        "crash": True,
        "tag": demo_tag(tag),
        "round_id": demo_round,
        "caps": {"per_caller": 3, "total": 50},
        "worker": None,  # no serve supervisor here
    }


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/proof/jobs"),
        ("GET", "/api/proof/jobs"),
        ("GET", "/api/proof/jobs/JOB00000000000000000000000"),
        ("POST", "/api/proof/jobs/JOB00000000000000000000000/resubmit"),
        ("POST", "/api/proof/jobs/JOB00000000000000000000000/stale"),
    ],
)
def test_with_the_proof_off_its_endpoints_are_403(serve_app, host_config, join, method, path):
    served = serve_app(dataclasses.replace(host_config, proof=False))
    _, ada = join(on=served)
    reply = ada.request(method, path, json={} if method == "POST" else None)
    assert (reply.status_code, error_code(reply)) == (403, "forbidden")
    with served.client() as anon:
        shown = anon.get("/api/proof").json()
    assert (shown["enabled"], shown["crash"], shown["tag"], shown["worker"]) == (False, False, None, None)


def test_a_job_on_its_first_delivery_has_no_stale_token_to_race(served, join, redis_server, tag):
    """Its only token is the live one, which would finish it unscored: the host refuses to race it."""
    open_demo_round(redis_server.url, tag)
    _, ada = join()
    job = ada.post("/api/proof/jobs", json={}).json()["job_id"]

    async def claim():
        async with Bus.from_url(redis_server.url, demo_tag(tag)) as bus:
            return await bus.claim(1, lease_ms=60_000)

    [held] = run(claim())
    assert held.job == job
    reply = ada.post(f"/api/proof/jobs/{job}/stale")
    assert (reply.status_code, error_code(reply)) == (409, "no_stale_token")
    still = job_of(ada, job)
    assert (still["state"], still["attempts"], still["scored_count"]) == ("active", 1, 0)


def test_a_player_uses_the_proof_after_its_old_round_and_demo_player_were_purged(
    served, join, redis_server, sync_redis, tag, demo_worker
):
    """The demo round is closed and purged with its idle demo player (as serve's proof runner does after
    the grace): the caller's next proof job opens on the next round, registered anew, and is scored."""
    old = open_demo_round(redis_server.url, tag)
    _, ada = join()
    first = ada.post("/api/proof/jobs", json={}).json()["job_id"]
    assert scored(ada, first)["scored_count"] == 1

    async def next_round_and_purge():
        async with proof.demo_game(redis_server.url, tag) as demo:
            await rounds.close_round(demo, old)
            following = await proof.ensure_round(demo)
            return following.id, await proof_retention.purge(demo, grace_s=0)

    following, done = run(next_round_and_purge())
    assert (done.rounds, done.retired) == ((old,), 1)
    assert not list(sync_redis.scan_iter(match=f"cmx*:{{{demo_tag(tag)}}}:*{old}*"))  # nothing of it left
    assert ada.get("/api/proof/jobs").json() == {"round_id": following, "guesses": [], "balances": {}}
    again = ada.post("/api/proof/jobs", json={})
    assert again.status_code == 202, again.text
    assert scored(ada, again.json()["job_id"])["scored_count"] == 1
    mine = ada.get("/api/proof/jobs").json()
    assert [g["job_id"] for g in mine["guesses"]] == [again.json()["job_id"]]
    assert mine["balances"] == {"proof": 1_000_000 - 1}  # a fresh demo grant
