"""The operator endpoints over real HTTP: the operator token guards them; they open and close rounds, show
the queue (stats, leases, dead letters, throughput) and retry a dead letter."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from codemojex.payload import encode_payload
from echomq import Bus, ids
from tests.support.web import FRUIT, error_code, open_round, run, wait_until


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/operator/rounds"),
        ("POST", "/api/operator/rounds/RND00000000000000000000000/close"),
        ("GET", "/api/operator/stats"),
        ("GET", "/api/operator/leases"),
        ("GET", "/api/operator/dead"),
        ("POST", "/api/operator/dead/JOB00000000000000000000000/retry"),
        ("GET", "/api/operator/throughput"),
    ],
)
def test_operator_routes_need_the_operator_token(served, join, method, path):
    with served.client() as nobody:
        assert nobody.request(method, path, json={}).status_code == 401
    _, ada = join()
    refused = ada.request(method, path, json={})
    assert refused.status_code == 403
    assert error_code(refused) == "forbidden"


def test_without_an_operator_token_configured_nobody_is_an_operator(serve_app, host_config):

    served = serve_app(dataclasses.replace(host_config, operator_token=None))
    with served.client("anything-at-all-here") as guess:
        assert guess.get("/api/operator/stats").status_code == 403


def test_an_operator_opens_and_closes_rounds(operator, anon):
    opened = open_round(operator, size=None, duration_s=3600, prices=[{"currency": "ticket", "amount": 2}])
    assert opened["status"] == "open"
    assert opened["keyboard"] == FRUIT
    assert opened["closes_ms"] - opened["opens_ms"] == 3_600_000
    assert anon.get("/api/rounds/current").json()["round_id"] == opened["round_id"]
    closed = operator.post(f"/api/operator/rounds/{opened['round_id']}/close")
    assert closed.status_code == 200
    assert closed.json()["round_id"] == opened["round_id"]
    again = operator.post(f"/api/operator/rounds/{opened['round_id']}/close")
    assert (again.status_code, error_code(again)) == (409, "round_closed")


def test_a_random_keyboard_of_a_given_size(operator):
    reply = operator.post("/api/operator/rounds", json={"size": 5})
    assert reply.status_code == 201
    assert len(reply.json()["keyboard"]) == 5


@pytest.mark.parametrize(
    ("spec", "status", "code"),
    [
        ({"size": 1}, 400, "invalid_option"),
        ({"keyboard": ["🍎", "🍎", "🍌"]}, 400, "invalid_keyboard"),
        ({"keyboard": ["a", "b"]}, 400, "invalid_keyboard"),
        ({"size": 5, "keyboard": FRUIT}, 400, "invalid_option"),
        ({"prices": [{"currency": "TICKET", "amount": 1}]}, 400, "invalid_option"),
        ({"prices": [{"currency": "ticket", "amount": 0}]}, 400, "invalid_option"),
        ({"max_guesses": 0}, 400, "invalid_option"),
        ({"duration_s": -1}, 400, "invalid_option"),
        ({"secret": ["🍎"] * 6}, 422, "malformed_body"),
    ],
)
def test_bad_round_options_open_nothing(operator, sync_redis, tag, spec, status, code):
    reply = operator.post("/api/operator/rounds", json=spec)
    assert (reply.status_code, error_code(reply)) == (status, code)
    assert sync_redis.zcard(f"cmx:{{{tag}}}:rounds") == 0


def test_stats_and_leases_show_the_queue(served, operator, join, redis_server, tag):
    the_round = open_round(operator)
    player_id, ada = join()
    for _ in range(3):
        ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    stats = operator.get("/api/operator/stats").json()
    assert stats["depth"]["queued"] == 3
    assert stats["counters"]["admitted"] == 3
    assert stats["lanes"] == [{"lane": player_id, "depth": 3, "lag": 0}]

    async def claim_one():
        async with Bus.from_url(redis_server.url, tag) as bus:
            return await bus.claim(1, lease_ms=60_000, owner="test-worker")

    [claim] = run(claim_one())
    leases = operator.get("/api/operator/leases").json()
    assert leases["leases"] == [
        {
            "job_id": claim.job,
            "lane": player_id,
            "deadline_ms": claim.deadline_ms,
            "attempts": 1,
            "owner": "test-worker",
        }
    ]
    assert claim.deadline_ms - leases["server_ms"] > 50_000


def test_a_dead_letter_is_listed_and_retried(served, operator, join, redis_server, tag):
    the_round = open_round(operator)
    player_id, _ = join()
    job = ids.mint("JOB")  # fresh: an id minted over 24 h ago is refused (echomq.ids)

    async def dead_letter():
        async with Bus.from_url(redis_server.url, tag) as bus:
            payload = encode_payload(the_round["round_id"], player_id, ["🍎"] * 6)
            await bus.enqueue(job, lane=player_id, payload=payload)
            [claim] = await bus.claim(1)
            await bus.fail(claim, "boom: the handler gave up", retryable=False)

    run(dead_letter())
    [dead] = operator.get("/api/operator/dead").json()["dead"]
    assert dead["job_id"] == job
    assert dead["lane"] == player_id
    assert dead["tries"] == 1
    assert "boom" in dead["error"]
    retried = operator.post(f"/api/operator/dead/{job}/retry")
    assert retried.json() == {"job_id": job, "retried": True}
    assert operator.get("/api/operator/dead").json()["dead"] == []
    assert operator.get("/api/operator/stats").json()["depth"]["queued"] == 1
    twice = operator.post(f"/api/operator/dead/{job}/retry")
    assert twice.json()["retried"] is False
    assert error_code(operator.post("/api/operator/dead/nope/retry")) == "invalid_id"


def test_throughput_samples_count_admissions_per_interval(served, operator, join):
    the_round = open_round(operator)
    _, ada = join()
    for _ in range(2):
        ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})

    def admitted():
        samples = operator.get("/api/operator/throughput").json()["samples"]
        return sum(s["admitted"] for s in samples) == 2 and samples

    samples = wait_until(admitted, what="two admissions in the samples")
    assert operator.get("/api/operator/throughput").json()["interval_s"] == 0.2
    assert all(later["at_ms"] > earlier["at_ms"] for earlier, later in itertools.pairwise(samples))
