"""Durable admission (echomq.durable) keeps no connection open to a node it gave up on, and does not pile
up the node clients it gave up on (found by the adversary pass, failing first): calls still in flight on
a given-up client used to reconnect it after its close, and each admission refused during a slot move
kept one more client until aclose."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from echomq import Bus, RedisUnavailable, Settings, ids
from echomq.partitions import PartitionedBus
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import SlotMigration, slot_of, slot_owner

pytestmark = pytest.mark.slow


def _open_in_retired(pbus: PartitionedBus) -> int:
    count = 0
    for bus in pbus.partitions:
        assert bus.durable is not None
        for client in bus.durable._retired:
            pool = client.connection_pool
            count += sum(
                1 for c in [*pool._in_use_connections, *pool._available_connections] if c.is_connected
            )
    return count


async def test_a_failover_leaves_no_connection_open_in_a_retired_node_client():
    with RedisClusterProcesses(3, replicas=1) as cluster:
        url = f"redis://127.0.0.1:{cluster.ports[1]}/0"
        settings = Settings(wait_replicas=1, wait_timeout_ms=300)
        pbus = PartitionedBus.from_url(url, tag="dl", partitions=3, settings=settings, cluster=True)
        stop = asyncio.Event()

        async def produce(lane: str) -> None:
            while not stop.is_set():
                job = ids.mint("JOB")
                while not stop.is_set():
                    try:
                        await pbus.enqueue(job, lane=lane, payload=b"p")
                        break
                    except RedisUnavailable:
                        await asyncio.sleep(0.02)
                await asyncio.sleep(0.002)

        producers = [asyncio.create_task(produce(f"L{i}")) for i in range(12)]
        try:
            await asyncio.sleep(1.5)
            for victim in cluster.masters()[:2]:
                await asyncio.to_thread(cluster.fail_over, victim)
                await asyncio.to_thread(cluster.rejoin, victim)
                await asyncio.sleep(1.0)
            await asyncio.sleep(2.0)  # the topology settled; the producers still admit
            assert _open_in_retired(pbus) == 0, "connections left open in node clients given up on"
        finally:
            stop.set()
            await asyncio.gather(*producers)
            with contextlib.suppress(Exception):
                await pbus.aclose()


async def test_admissions_refused_during_a_slot_move_do_not_pile_up_node_clients():
    """While the bus's slot is migrating (every key already on the target), each durable admission is
    answered ASK by the source: ``run`` reads it as a moved slot, ``_forget`` retires the node client and
    keeps it in ``_retired`` until aclose, and the next call opens a new one to the same source, which
    answers ASK again. A producer retrying through a long move keeps one more client (~26 KB, measured
    with tracemalloc) per attempt, for as long as it lives."""
    with RedisClusterProcesses(3) as cluster:
        url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
        settings = Settings(wait_replicas=1, wait_timeout_ms=50)
        bus = Bus.from_url(url, tag="mv", cluster=True, settings=settings)
        try:
            with contextlib.suppress(RedisUnavailable):  # no replica here: NotDurable, but admitted
                await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"x")
            slot = slot_of(bus.keys.ring)
            move = SlotMigration(
                cluster, slot, next(p for p in cluster.ports if p != slot_owner(cluster, slot))
            )
            move.begin()
            move.move_all(move.pending())
            for _ in range(40):
                with contextlib.suppress(RedisUnavailable):
                    await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"x")
            assert bus.durable is not None
            assert len(bus.durable._retired) <= 4, f"{len(bus.durable._retired)} node clients kept"
            move.finish()
        finally:
            await bus.aclose()
