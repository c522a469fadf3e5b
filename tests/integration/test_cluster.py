"""A bus on a real three-node Redis Cluster: every key of a bus is in one slot, so every script runs whole
on the node that owns it, whichever node that is."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from echomq import Admission, Bus, Failure, Finish, InvalidOption, NewJob, Worker, ids
from echomq.server import RedisClusterProcesses
from tests.support import invariants

# Tags whose slots fall on each of the three nodes' thirds of the slot space.
TAGS = ("cm", "game-7", "t42")


@pytest.fixture(scope="module")
def cluster():
    """Three cluster-enabled redis-server processes, slots split evenly, cluster_state ok."""
    with RedisClusterProcesses(3) as nodes:
        yield nodes


def _owner(cluster, key: str) -> int:
    """The port of the node that owns ``key``'s slot."""
    slot = key_slot(key.encode())
    return cluster.ports[min(2, slot // (16384 // 3))]


def test_the_chosen_tags_live_on_different_nodes(cluster):
    """The test tags spread over the nodes, so the scripts below run on more than one of them."""
    owners = {_owner(cluster, Bus.from_url("redis://x", tag=tag).keys.ring) for tag in TAGS}
    assert len(owners) >= 2


@pytest.mark.parametrize("tag", TAGS)
async def test_the_queue_works_whole_on_the_node_that_owns_the_tag(cluster, tag):
    """Enqueue, duplicate, batch enqueue, claim, complete, fail, sweep and stats all run on a cluster, and
    every key they wrote sits on the one node that owns the tag's slot."""
    bus = Bus.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag=tag, cluster=True)
    try:
        assert bus.is_cluster
        job = ids.mint("JOB")
        assert await bus.enqueue(job, lane="PLRa", payload=b"g") is Admission.ADMITTED
        assert await bus.enqueue(job, lane="PLRa", payload=b"g") is Admission.DUPLICATE
        more = [NewJob(ids.mint("JOB"), f"PLR{i}", b"h") for i in range(4)]
        assert await bus.enqueue_many(more) == [Admission.ADMITTED] * 4
        claims = await bus.claim(count=5, lease_ms=10_000)
        assert sorted(c.job for c in claims) == sorted([job, *(m.job for m in more)])
        outcomes = [await bus.complete(c) for c in claims[:4]]
        assert outcomes == [Finish.DONE] * 4
        assert await bus.complete(claims[0]) is Finish.STALE
        assert await bus.fail(claims[4], "boom", retryable=False) is Failure.DEAD
        await bus.sweep()
        stats = await bus.stats()
        assert stats.counters["completed"] == 4
        assert stats.dead == 1

        owner = redis.Redis(port=_owner(cluster, bus.keys.ring))
        local = {key.decode() for key in owner.scan_iter(match=bus.keys.pattern)}
        assert bus.keys.job(job) in local
        assert bus.keys.done in local
        assert invariants.check(owner, bus.keys) == {
            **dict.fromkeys((c.job for c in claims[:4]), "done"),
            claims[4].job: "dead",
        }
        for port in cluster.ports:
            if port != _owner(cluster, bus.keys.ring):
                other = redis.Redis(port=port)
                assert list(other.scan_iter(match=bus.keys.pattern)) == []
                other.close()
        owner.close()
    finally:
        await bus.aclose()


async def test_the_worker_refuses_a_cluster_client_with_a_clear_error(cluster):
    """The worker needs a single-node client for its lease keeper; on a cluster bus it says so."""
    bus = Bus.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag="cm", cluster=True)
    try:
        worker = Worker(bus, lambda job: None)
        with pytest.raises(InvalidOption, match="one server"):
            await worker.run()
    finally:
        await bus.aclose()
