"""A bus on a real three-node Redis Cluster: every key of a bus is in one slot, so every script runs whole
on the node that owns it, whichever node that is; the worker (in process and as `echomq --cluster worker`)
runs on such a bus."""

from __future__ import annotations

import contextlib
import signal
import time

import pytest
import redis
from redis.crc import key_slot

from echomq import Admission, Bus, Failure, Finish, NewJob, Worker, ids
from echomq.keyspace import Keyspace
from echomq.partitions import PartitionedBus
from echomq.testing.cluster import RedisClusterProcesses
from tests.support import invariants
from tests.support.workers import Sweeper, cli, eventually, job_state, running, state_is, stop_process

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


@pytest.mark.parametrize("cli", [True, False], ids=["redis-cli", "commands"])
def test_the_fixture_forms_the_same_cluster_by_redis_cli_or_by_its_commands(cli):
    """Three masters in slot order (every slot served), one replica each, replica i of master i % 3:
    what `redis-cli --cluster create` makes, and what the fixture makes without it."""
    with RedisClusterProcesses(3, replicas=1, cli=cli) as nodes, redis.Redis(port=nodes.ports[0]) as client:
        slots = sorted(
            (int(start), int(end), int(owner[1])) for start, end, owner, *_ in client.cluster("slots")
        )
        assert [owner for _, _, owner in slots] == nodes.ports
        assert slots[0][0] == 0
        assert slots[-1][1] == 16383
        assert all(slots[i][1] + 1 == slots[i + 1][0] for i in range(2))
        for i, port in enumerate(nodes.replica_ports):
            with redis.Redis(port=port) as replica:
                assert int(replica.info("replication")["master_port"]) == nodes.ports[i % 3]


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
        assert await bus.complete(claims[0]) is Finish.DONE  # a retry of this claim's own complete
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


def _tags_on_each_node(cluster, prefix: str) -> list[str]:
    """One tag per node of the cluster (the first candidates ``prefix-N`` whose slot each node owns)."""
    found: dict[int, str] = {}
    for n in range(1000):
        tag = f"{prefix}-{n}"
        found.setdefault(_owner(cluster, Keyspace(tag).ring), tag)
        if len(found) == len(cluster.ports):
            return list(found.values())
    raise AssertionError("no tag found for every node")


def _url(cluster) -> str:
    return f"redis://127.0.0.1:{cluster.ports[0]}/0"


async def _enqueue(bus: Bus, count: int, lanes: int) -> list[str]:
    jobs = [NewJob(ids.mint("JOB"), f"PLR{i % lanes}", b"p") for i in range(count)]
    assert await bus.enqueue_many(jobs) == [Admission.ADMITTED] * count
    return [job.job for job in jobs]


async def test_a_batch_larger_than_the_connection_pool_is_admitted_whole_on_a_cluster(cluster, tag):
    """On a cluster a batch goes as one script call each (the cluster pipeline refuses scripts); a batch of
    far more jobs than the client's pool holds connections is admitted whole, not refused by the pool."""
    url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
    async with Bus.from_url(url, tag=tag, cluster=True, max_connections=8) as bus:
        batch = [NewJob(ids.mint("JOB"), f"PLR{i % 7}", b"x") for i in range(600)]
        assert await bus.enqueue_many(batch) == [Admission.ADMITTED] * 600
        assert (await bus.stats()).queued == 600
    async with PartitionedBus.from_url(
        url, tag=f"{tag}p", partitions=3, cluster=True, max_connections=8
    ) as pbus:
        batch = [NewJob(ids.mint("JOB"), f"PLR{i % 50}", b"x") for i in range(600)]
        assert await pbus.enqueue_many(batch) == [Admission.ADMITTED] * 600  # three partitions, one pool
        assert (await pbus.stats()).queued == 600


async def test_a_worker_on_a_cluster_bus_completes_every_job_on_each_node(cluster):
    """One in-process worker per bus, with the buses on different nodes, completes every job of every lane
    once, and each bus's keys end consistent on the node that owns its tag."""
    tags = _tags_on_each_node(cluster, "wk")
    buses = [Bus.from_url(_url(cluster), tag=tag, cluster=True) for tag in tags]
    try:
        queued = [await _enqueue(bus, 40, lanes=7) for bus in buses]
        workers = [Worker(bus, lambda job: b"ok", concurrency=8, lease_ms=5_000) for bus in buses]
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(running(worker))

            async def all_done() -> bool:
                return all([(await bus.stats()).counters["completed"] == 40 for bus in buses])

            await eventually(all_done, 20, "every bus drained")
        for bus, worker, jobs in zip(buses, workers, queued, strict=True):
            assert worker.counts.completed == 40
            assert worker.counts.stale == worker.counts.failed == 0
            counters = (await bus.stats()).counters
            assert counters["completed"] == 40
            assert counters["reclaimed"] == 0
            owner = redis.Redis(port=_owner(cluster, bus.keys.ring))
            try:
                assert invariants.check(owner, bus.keys) == dict.fromkeys(jobs, "done")
            finally:
                owner.close()
    finally:
        for bus in buses:
            await bus.aclose()


async def test_a_long_handler_keeps_its_lease_on_a_cluster(cluster):
    """A handler that blocks the event loop for several leases keeps its job on a cluster bus: the lease
    keeper's renewals land, a concurrent sweeper reclaims nothing, and the job completes once."""
    tag = _tags_on_each_node(cluster, "lease")[1]
    runs = []

    def handler(job):
        runs.append(job.attempt)
        time.sleep(4.5)  # three leases long; only the keeper thread renews meanwhile
        return b"finished"

    bus = Bus.from_url(_url(cluster), tag=tag, cluster=True)
    try:
        [job] = await _enqueue(bus, 1, lanes=1)
        with Sweeper(_url(cluster), tag, cluster=True) as sweeper:
            async with running(Worker(bus, handler, lease_ms=1500)):
                await eventually(lambda: state_is(bus, job, "done"), 20, "the job completed")
        assert sweeper.reports
        assert sweeper.reclaimed == 0
        counters = (await bus.stats()).counters
        assert counters["reclaimed"] == 0
        assert counters["extended"] > 0
        assert counters["stale"] == 0
        assert counters["completed"] == 1
        assert runs == [1]
    finally:
        await bus.aclose()


async def test_the_worker_command_drains_a_cluster_bus_and_stops_on_sigterm(cluster, tmp_path):
    """`echomq --cluster --tag T worker` completes the jobs queued on a cluster bus, then exits 0 on
    SIGTERM."""
    tag = _tags_on_each_node(cluster, "cli")[2]
    async with Bus.from_url(_url(cluster), tag=tag, cluster=True) as bus:
        jobs = await _enqueue(bus, 25, lanes=5)
        proc = cli(
            _url(cluster), "--cluster", "--tag", tag, "worker", "tests.faults.handlers:noop", markers=tmp_path
        )
        try:

            async def drained() -> bool:
                if proc.poll() is not None:
                    raise AssertionError(f"worker exited with {proc.returncode}")
                return (await bus.stats()).counters["completed"] == len(jobs)

            await eventually(drained, 20, "the worker drained the bus")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0
        finally:
            stop_process(proc)
        assert all((tmp_path / f"{job}.1.finished").exists() for job in jobs)
        assert [await job_state(bus, job) for job in jobs] == ["done"] * len(jobs)
