"""What a player or an anonymous client must not learn: the workers' hosts and pids, which job ids exist,
which players queue (the public /metrics); and an undecodable body is a malformed one (422), not a 400."""

from __future__ import annotations

import dataclasses

import pytest

from codemojex.supervisor import WorkerStatus
from echomq import Bus
from tests.support.web import OPERATOR, error_code, open_round, run

GUESS = {"guess": "🍎🍌🍇🍒🥝🍑"}


@pytest.mark.parametrize(
    "content",
    [b'{"guess": "\xff\xfe"}', b"\xff", b"\xc3\x28", b'{"name": "Ada\x80"}'],
    ids=["bad-utf8-in-a-string", "one-bad-byte", "bad-continuation", "bad-utf8-in-a-name"],
)
def test_a_body_that_is_not_utf8_is_422_malformed_body(served, operator, join, content):
    the_round = open_round(operator)
    _, ada = join()
    for client, path in [(ada, f"/api/rounds/{the_round['round_id']}/guesses"), (ada, "/api/players")]:
        reply = client.post(path, content=content, headers={"content-type": "application/json"})
        assert reply.status_code == 422, path
        assert error_code(reply) == "malformed_body"
        assert reply.json()["error"]["errors"]


def test_a_job_shows_its_claiming_worker_to_the_operator_only(served, operator, join, redis_server, tag):
    the_round = open_round(operator)
    _, ada = join()
    job = ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json=GUESS).json()["job_id"]

    async def claim_one():
        async with Bus.from_url(redis_server.url, tag) as bus:
            return await bus.claim(1, lease_ms=60_000, owner="worker-host:4242")

    [claim] = run(claim_one())
    assert claim.job == job
    mine = ada.get(f"/api/jobs/{job}").json()
    assert mine["state"] == "active"
    assert mine["owner"] is None
    assert "4242" not in str(mine)
    assert operator.get(f"/api/jobs/{job}").json()["owner"] == "worker-host:4242"


def test_another_players_job_and_a_job_never_admitted_get_the_same_404(served, operator, join):
    the_round = open_round(operator)
    _, ada = join()
    _, bob = join("Bob")
    job = ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json=GUESS).json()["job_id"]
    never = "JOB00000000000000000000000"
    for action in ("", "/resubmit", "/stale"):
        method = "GET" if not action else "POST"
        prefix = "/api/jobs/" if not action else "/api/proof/jobs/"
        theirs = bob.request(method, f"{prefix}{job}{action}")
        unknown = bob.request(method, f"{prefix}{never}{action}")
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.text.replace(job, "JOB") == unknown.text.replace(
            never, "JOB"
        )  # byte for byte, but the id


def test_the_proof_shows_players_an_opaque_worker_instance_and_the_operator_its_pid(
    serve_app, host_config, join
):
    worker = {"status": WorkerStatus(pid=4242, restarts=3, alive=True)}
    served = serve_app(dataclasses.replace(host_config, worker_status=lambda: worker["status"]))
    _, ada = join(on=served)
    with served.client() as anon, served.client(OPERATOR) as operator:
        for client in (anon, ada):
            shown = client.get("/api/proof").json()["worker"]
            assert shown["pid"] is None  # the schema's fields, empty
            assert shown["restarts"] is None
            assert shown["alive"] is True
            assert "4242" not in str(shown)
        before = anon.get("/api/proof").json()["worker"]["instance"]
        seen = operator.get("/api/proof").json()["worker"]
        assert seen == {"instance": before, "alive": True, "pid": 4242, "restarts": 3}
        worker["status"] = WorkerStatus(pid=4243, restarts=4, alive=True)  # the supervisor restarted it
        assert anon.get("/api/proof").json()["worker"]["instance"] != before
