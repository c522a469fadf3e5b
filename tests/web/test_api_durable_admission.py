"""A guess POSTed to a host whose bus waits for a replica (``HostConfig.bus_settings``, ``python -m
codemojex.web --wait-replicas``): the one-call path (post_guess.lua) and the routes' path (submit.lua)
are answered 202 once the replica holds the guess, 503 ``unavailable`` when none acknowledged it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from codemojex.web import HostConfig
from echomq import Settings
from echomq.keyspace import Keyspace
from echomq.testing.server import RedisProcess
from tests.support.web import OPERATOR, error_code, open_round, wait_until

DURABLE = Settings(wait_replicas=1, wait_timeout_ms=300)
GUESS = {"guess": "🍎🍌🍇🍒🥝🍑"}


@pytest.fixture
def master() -> Iterator[RedisProcess]:
    with RedisProcess(appendonly=False) as server:
        yield server


def test_a_durable_guess_is_answered_once_the_replica_holds_it(serve_app, master, tag):
    """Both paths (the routes' and the one-call) answer 202 after WAIT (the bus's 'durable' counter
    counts them), the job on the replica; with the replica gone, a guess is 503 unavailable."""
    served = serve_app(
        HostConfig(redis_url=master.url, tag=tag, operator_token=OPERATOR, bus_settings=DURABLE)
    )
    keys = Keyspace(tag)
    with (
        RedisProcess(appendonly=False) as replica,
        redis.Redis(port=replica.port) as on_replica,
        redis.Redis(port=master.port) as on_master,
        served.client(OPERATOR) as operator,
        served.client() as anon,
    ):
        on_replica.replicaof("127.0.0.1", master.port)
        wait_until(lambda: on_replica.info("replication")["master_link_status"] == "up", what="in sync")
        round_id = open_round(operator)["round_id"]
        token = anon.post("/api/players", json={"name": "Ada"}).json()["token"]
        with served.client(token) as ada:
            path = f"/api/rounds/{round_id}/guesses"
            routed = ada.post(path, json=GUESS)  # the routes' path: the host learns the round's keyboard
            keyed = ada.post(path, json=GUESS, headers={"Idempotency-Key": "k1"})  # the routes' path
            one_call = ada.post(path, json=GUESS)  # post_guess.lua, the keyboard known
            replies = (routed, keyed, one_call)
            assert [reply.status_code for reply in replies] == [202] * 3, [reply.text for reply in replies]
            for reply in replies:
                assert on_replica.exists(keys.job(reply.json()["job_id"])) == 1
            assert int(on_master.hget(keys.stats, "durable") or 0) == 3  # each admission waited
            on_replica.replicaof("NO", "ONE")
            wait_until(lambda: on_master.info("replication")["connected_slaves"] == 0, what="replica gone")
            refused = ada.post(path, json=GUESS)
            assert refused.status_code == 503, refused.text
            assert error_code(refused) == "unavailable"
            assert refused.headers["retry-after"]
