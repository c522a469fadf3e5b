"""The web host of a game spread over a real three-master Redis Cluster (``python -m codemojex.web
--cluster --partitions 3``): each partition on a master of its own, players of every partition join,
guess on both paths and are scored by ``codemojex --cluster worker --partitions 3``; each guess is
charged, admitted and scored on its player's master, and the host's board is the whole game's."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest
import redis

from codemojex import names
from codemojex.keys import GameKeys
from codemojex.web import HostConfig
from echomq.keyspace import Keyspace
from echomq.partitions import partition_of, partition_tags
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.cluster import slot_master, spread_tag
from tests.support.web import FRUIT, OPERATOR, open_round, stop_worker, wait_until, worker_process

P = 3
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterProcesses]:
    with RedisClusterProcesses(3) as nodes:
        yield nodes


def _names() -> list[str]:
    found: dict[int, str] = {}
    for name in ("Ada", "Bob", "Cyd", "Dee", "Eve", "Fox", "Gus", "Hal", "Ivy", "Jon"):
        found.setdefault(zlib.crc32(names.skeleton(name).encode()) % P, name)
    return [found[p] for p in range(P)]


def test_a_spread_host_on_a_cluster_serves_each_player_from_their_own_master(serve_app, cluster):
    tag = spread_tag("web")
    url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
    host = serve_app(HostConfig(redis_url=url, tag=tag, cluster=True, partitions=P, operator_token=OPERATOR))
    masters = {slot_master(cluster, Keyspace(t).ring) for t in partition_tags(tag, P)}
    assert len(masters) == P  # each partition on its own master
    worker = worker_process(url, tag, partitions=P, cluster=True)
    try:
        with host.client(OPERATOR) as operator:
            round_id = open_round(operator)["round_id"]
            jobs: list[tuple[str, str]] = []
            for p, name in enumerate(_names()):
                with host.client() as anon:
                    joined = anon.post("/api/players", json={"name": name}).json()
                player_id = joined["player_id"]
                assert partition_of(player_id, P) == p
                with host.client(joined["token"]) as me:
                    path = f"/api/rounds/{round_id}/guesses"
                    for i in range(2):  # the routes' path (learns the keyboard), then the one-call path
                        reply = me.post(path, json={"guess": FRUIT[i : i + 6]})
                        assert reply.status_code == 202, reply.text
                        jobs.append((player_id, reply.json()["job_id"]))
                    assert me.get("/api/wallet").status_code == 200

            def scored() -> bool:
                return all(operator.get(f"/api/jobs/{job}").json()["scored_count"] == 1 for _, job in jobs)

            wait_until(scored, timeout=60, what="every guess scored once")
            for player_id, job in jobs:
                t = partition_tags(tag, P)[partition_of(player_id, P)]
                with redis.Redis(port=slot_master(cluster, Keyspace(t).ring)) as node:
                    assert node.zscore(Keyspace(t).done, job) is not None
                    assert node.exists(GameKeys(t).player(player_id)) == 1
            board = operator.get(f"/api/rounds/{round_id}/leaderboard").json()["entries"]
            assert sorted(e["player_id"] for e in board) == sorted({player for player, _ in jobs})
            stats = operator.get("/api/operator/stats").json()
            assert stats["counters"]["completed"] == len(jobs)
    finally:
        stop_worker(worker)
