"""Effects with the completion on a real three-node Redis Cluster: keys with the bus's hash tag are
written on the node that owns the bus, with the completion; a key of another slot is refused before
anything is sent; a worker's batch of completes with and without effects lands whole."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from echomq import Bus, Effects, Finish, InvalidEffect, Job, Worker, ids
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.workers import eventually, running

TAGS = ("cm", "game-7", "t42")  # tags whose slots fall on different nodes (see test_cluster.py)


@pytest.fixture(scope="module")
def cluster():
    """Three cluster-enabled redis-server processes, slots split evenly, cluster_state ok."""
    with RedisClusterProcesses(3) as nodes:
        yield nodes


def _owner(cluster, key: str) -> int:
    return cluster.ports[min(2, key_slot(key.encode()) // (16384 // 3))]


@pytest.mark.parametrize("tag", TAGS)
async def test_effects_with_the_bus_tag_apply_on_the_node_that_owns_it(cluster, tag):
    """Effects on keys with the bus's hash tag apply with the completion, on the bus's node; a stale
    claim applies none; a key of another slot raises InvalidEffect and nothing is sent."""
    bus = Bus.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag=tag, cluster=True)
    owner = redis.Redis(port=_owner(cluster, bus.keys.ring))
    try:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="L", payload=b"p")
        [claim] = await bus.claim(lease_ms=10_000)
        counter, log = f"app:{{{tag}}}:n:{job}", f"app:{{{tag}}}:log:{job}"
        elsewhere = next(
            f"app:{{{other}}}:n" for other in TAGS if key_slot(other.encode()) != key_slot(tag.encode())
        )
        for bad in (elsewhere, f"app:n:{job}"):  # another tag's slot; no tag, whichever slot it hashes to
            if key_slot(bad.encode()) == key_slot(tag.encode()):
                continue
            with pytest.raises(InvalidEffect, match="cluster slot"):
                await bus.complete(claim, effects=Effects().incrby(counter, 1).incrby(bad, 1))
        assert (await bus.inspect(job)).state.value == "active"
        assert owner.exists(counter) == 0

        fx = Effects().incrby(counter, 1).rpush(log, claim.token)
        assert await bus.complete(claim, b"ok", effects=fx) is Finish.DONE
        assert await bus.complete(claim, b"ok", effects=fx) is Finish.DONE  # a retry: nothing again
        assert (owner.get(counter), owner.lrange(log, 0, -1)) == (b"1", [b"1"])
        stale = type(claim)(claim.job, claim.lane, claim.token + 1, request=claim.request)
        assert await bus.complete(stale, effects=Effects().incrby(counter, 5)) is Finish.STALE
        assert owner.get(counter) == b"1"
    finally:
        owner.close()
        await bus.aclose()


async def test_a_worker_on_a_cluster_applies_each_jobs_effects_once(cluster):
    """A worker on a cluster bus whose handler returns effects for two jobs in three: every job done, the
    counter moved once per job with effects (the batch goes one script call each, by kind)."""
    tag = TAGS[1]
    bus = Bus.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag=tag, cluster=True)
    counter = f"app:{{{tag}}}:worker-n"
    owner = redis.Redis(port=_owner(cluster, bus.keys.ring))
    owner.delete(counter)

    async def handler(job: Job) -> Effects | bytes:
        if int(job.payload) % 3 == 0:
            return b"plain"
        return Effects().incrby(counter, 1)

    try:
        for i in range(30):
            await bus.enqueue(ids.mint("JOB"), lane=f"L{i % 4}", payload=str(i).encode())
        async with running(Worker(bus, handler, concurrency=8, lease_ms=5_000)) as worker:
            await eventually(lambda: worker.counts.completed == 30, 30, "every job completed")
        assert worker.counts.stale == worker.counts.failed == 0
        assert owner.get(counter) == b"20"
    finally:
        owner.close()
        await bus.aclose()
