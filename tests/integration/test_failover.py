"""Durable admission (echomq.durable) and a master's failover under a running partitioned queue, on real
servers: a plain master without a replica, a master with one, and a Redis Cluster of three masters and
three replicas whose master is SIGKILLed mid-run and promoted away."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import redis

from echomq import Admission, Bus, NewJob, NotDurable, RedisUnavailable, Settings, SyncBus, Worker, ids
from echomq.partitions import PartitionedBus
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.invariants import job_rows, locations, queue_structure
from echomq.testing.reshard import SlotMigration, slot_of, slot_owner
from echomq.testing.server import RedisProcess
from tests.support.cluster import slot_master, spread_tag
from tests.support.workers import eventually, running

DURABLE = Settings(wait_replicas=1, wait_timeout_ms=300)


async def test_a_durable_admission_without_a_replica_is_refused_as_not_durable(redis_server, tag):
    """The admission ran on the master (the job is queued), but no replica acknowledged it: NotDurable,
    a RedisUnavailable, and its retry is a duplicate refused the same way."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=DURABLE)
    try:
        job = ids.mint("JOB")
        with pytest.raises(NotDurable):
            await bus.enqueue(job, lane="PLRa", payload=b"g")
        assert (await bus.inspect(job)).state.value == "queued"
        with pytest.raises(RedisUnavailable):
            await bus.enqueue(job, lane="PLRa", payload=b"g")
        assert (await bus.stats()).queued == 1
    finally:
        await bus.aclose()


def test_a_blocking_producer_refuses_a_durable_admission_without_a_replica(redis_server, tag):
    """SyncBus with wait_replicas: NotDurable as the asyncio bus, the job queued on the master."""
    with SyncBus.from_url(redis_server.url, tag=tag, settings=DURABLE) as bus:
        job = ids.mint("JOB")
        with pytest.raises(NotDurable):
            bus.enqueue(job, lane="PLRa", payload=b"g")
        assert bus.inspect(job).state.value == "queued"


async def test_a_durable_admission_returns_once_the_replica_holds_it(tag):
    """With a replica, each admission (and a batch, and a duplicate) comes back once the replica holds
    it: read from the replica right after, it is there."""
    with (
        RedisProcess(appendonly=False) as master,
        RedisProcess(appendonly=False) as replica,
        redis.Redis(port=replica.port) as client,
    ):
        client.replicaof("127.0.0.1", master.port)
        await eventually(lambda: client.info("replication")["master_link_status"] == "up")
        bus = Bus.from_url(master.url, tag=tag, settings=DURABLE)
        try:
            job = ids.mint("JOB")
            assert await bus.enqueue(job, lane="PLRa", payload=b"g") is Admission.ADMITTED
            assert client.exists(bus.keys.job(job)) == 1
            batch = [NewJob(ids.mint("JOB"), "PLRb", b"h") for _ in range(5)]
            assert await bus.enqueue_many([*batch, NewJob(job, "PLRa", b"g")]) == [
                *[Admission.ADMITTED] * 5,
                Admission.DUPLICATE,
            ]
            assert all(client.exists(bus.keys.job(new.job)) for new in batch)
            assert int(client.hget(bus.keys.stats, "durable")) == 2
            with SyncBus.from_url(master.url, tag=tag, settings=DURABLE) as blocking:
                later = [NewJob(ids.mint("JOB"), "PLRc", b"i") for _ in range(3)]
                assert blocking.enqueue_many(later) == [Admission.ADMITTED] * 3
                assert blocking.enqueue(later[0].job, lane="PLRc", payload=b"i") is Admission.DUPLICATE
                assert all(client.exists(bus.keys.job(new.job)) for new in later)
                assert int(client.hget(bus.keys.stats, "durable")) == 4
        finally:
            await bus.aclose()


# --- a failover on a cluster with replicas --------------------------------------------------------


@pytest.fixture(scope="module")
def replicated():
    """Three masters, each with one replica (a short node timeout: a dead master fails over in seconds)."""
    with RedisClusterProcesses(3, replicas=1) as nodes:
        yield nodes


def test_a_blocking_producer_admits_durably_on_a_cluster_with_replicas(replicated, tag):
    """SyncBus on a cluster: the pipeline goes to the slot master's own client; acknowledged once its
    replica holds the job (read from that replica right after)."""
    url = f"redis://127.0.0.1:{replicated.ports[2]}/0"
    with SyncBus.from_url(url, tag=tag, settings=DURABLE, cluster=True) as bus:
        jobs = [NewJob(ids.mint("JOB"), f"PLR{i}", b"s") for i in range(4)]
        assert bus.enqueue_many(jobs) == [Admission.ADMITTED] * 4
        assert bus.enqueue(jobs[0].job, lane="PLR0", payload=b"s") is Admission.DUPLICATE
        master = slot_master(replicated, bus.keys.ring)
        replica = next(p for p in replicated.replica_ports if _follows(p) == master)
        with redis.Redis(port=replica) as client:
            client.execute_command("READONLY")
            assert all(client.exists(bus.keys.job(job.job)) for job in jobs)


def _follows(port: int) -> int | None:
    with redis.Redis(port=port) as client:
        info = client.info("replication")
    return int(info["master_port"]) if info.get("role") == "slave" else None


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_no_durably_acknowledged_job_is_lost_when_a_master_fails_over(replicated):
    """Producers admit durably (retrying on RedisUnavailable, as a client does) while a worker drains a
    three-partition bus; a master is SIGKILLed, its replica promoted, and the old master rejoins as a
    replica. Every acknowledged job ends done exactly once on the surviving cluster, the queue's
    structure holds in every partition, and the worker follows the new topology by itself."""
    tag = spread_tag("fo")
    url = f"redis://127.0.0.1:{replicated.ports[1]}/0"
    pbus = PartitionedBus.from_url(url, tag=tag, partitions=3, settings=DURABLE, cluster=True)
    acked: list[str] = []
    ran: list[str] = []
    stop = asyncio.Event()

    async def handler(job):
        ran.append(job.id)

    async def produce(lane: str) -> None:
        while not stop.is_set():
            job = ids.mint("JOB")
            while True:
                try:
                    await pbus.enqueue(job, lane=lane, payload=b"p")
                    acked.append(job)
                    break
                except RedisUnavailable:  # NotDurable included: the same id again, until acknowledged
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.005)

    worker = Worker(pbus, handler, concurrency=8, lease_ms=2_000, sweep_every_s=0.5)
    victim = replicated.ports[0]
    try:
        async with running(worker):
            producers = [asyncio.create_task(produce(f"PLR{i}")) for i in range(6)]
            await eventually(lambda: len(acked) >= 100, what="admissions before the failover")
            promoted = await asyncio.to_thread(replicated.fail_over, victim)
            before = len(acked)
            await eventually(lambda: len(acked) >= before + 100, timeout=60, what="admissions after it")
            await asyncio.to_thread(replicated.rejoin, victim)
            stop.set()
            await asyncio.gather(*producers)
            done = set()

            async def all_done() -> bool:
                nonlocal done
                done = set()
                for bus in pbus.partitions:
                    done.update(job.decode() for job, _ in await _done_jobs(bus))
                return set(acked) <= done

            await eventually(all_done, timeout=60, what="every acknowledged job done")
        assert promoted != victim
        assert set(acked) <= set(ran)
        for bus in pbus.partitions:
            port = slot_master(replicated, bus.keys.ring)
            with redis.Redis(port=port) as client:
                where = locations(client, bus.keys)
                assert queue_structure(client, bus.keys, job_rows(client, bus.keys)) == []
            assert all(places == ["done"] for job, places in where.items() if job in acked)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await pbus.aclose()


async def _done_jobs(bus: Bus) -> list[tuple[bytes, float]]:
    return await bus.redis.zrange(bus.keys.done, 0, -1, withscores=True)  # type: ignore[no-any-return]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_slot_of_a_promoted_master_moves_to_another_master_and_back(replicated):
    """After a failover the masters are no longer the ones the cluster was formed with: the slot move of
    echomq.testing.reshard takes the promoted master as a source and a target, keys and all."""
    slot = slot_of("{moved}")
    victim = slot_owner(replicated, slot)
    with redis.RedisCluster(host="127.0.0.1", port=victim) as client:
        client.mset({f"{{moved}}:{i}": i for i in range(20)})
        client.execute_command("WAIT", 1, 2000, target_nodes=client.get_node_from_key("{moved}"))
    promoted = replicated.fail_over(victim)
    away = next(port for port in replicated.masters() if port != promoted)
    SlotMigration(replicated, slot, away).run()
    assert slot_owner(replicated, slot) == away
    SlotMigration(replicated, slot, promoted).run()
    replicated.rejoin(victim)
    assert slot_owner(replicated, slot) == promoted
    with redis.Redis(port=promoted) as client:
        assert [int(v) for v in client.mget([f"{{moved}}:{i}" for i in range(20)])] == list(range(20))
