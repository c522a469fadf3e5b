"""A cluster call whose connection another task closes under it is sent again, not failed.

redis-py 8.1's asyncio cluster client disconnects a node's connections from other tasks (a refreshed slot
map, a node marked failed, CLUSTERDOWN). A call caught between connecting and its first write failed with
redis-py's AttributeError, reported as RedisUnavailable: CI saw a partitioned worker's first calls and a
producer's first enqueue, side by side on a new client to a healthy cluster, fail so (the producer's
enqueue raised). The bus's cluster client (echomq._clients.ClusterClient) sends such a call again on a new
connection, as redis-py does after a ConnectionError.

The race is made here on purpose: the node's one connection, disconnected, is closed again by another
task the moment the call has connected it, before the call's first write."""

from __future__ import annotations

import asyncio

import pytest

from echomq import Admission, Bus, ids
from echomq.partitions import PartitionedBus
from echomq.states import JobState
from echomq.testing.cluster import RedisClusterProcesses


@pytest.fixture(scope="module")
def cluster():
    with RedisClusterProcesses(3) as nodes:
        yield nodes


async def _close_when_connected(connection) -> None:
    """Another task's disconnect, landing right after ``connection`` connects (before its first write)."""
    while not connection.is_connected:
        await asyncio.sleep(0)
    await connection.disconnect(nowait=True)


async def _race_next_call(client, key: str) -> asyncio.Future[None]:
    """Arrange the race for the next call on ``key``'s node: its only connection, disconnected, is
    closed again by another task as soon as the call connects it."""
    node = client.get_node_from_key(key)
    assert len(node._free) == 1, "the node has one connection, which the next call takes"
    connection = node._free[0]
    await connection.disconnect()
    return asyncio.ensure_future(_close_when_connected(connection))


async def test_an_enqueue_whose_connection_is_closed_under_it_is_admitted(cluster):
    bus = Bus.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag="race", cluster=True)
    try:
        first = ids.mint("JOB")
        assert await bus.enqueue(first, lane="L", payload=b"a") is Admission.ADMITTED
        closer = await _race_next_call(bus.redis, bus.keys.ring)
        job = ids.mint("JOB")
        assert await bus.enqueue(job, lane="L", payload=b"b") is Admission.ADMITTED
        await closer
        assert (await bus.inspect(job)).state is JobState.QUEUED
        assert await bus.enqueue(job, lane="L", payload=b"b") is Admission.DUPLICATE  # admitted once
    finally:
        await bus.aclose()


async def test_a_partitioned_bus_layout_check_whose_connection_is_closed_under_it_passes(cluster):
    """The call CI saw fail: a new partitioned bus's first call, its layout check (SET NX of i/P)."""
    pbus = PartitionedBus.from_url(
        f"redis://127.0.0.1:{cluster.ports[0]}/0", tag="race-p", partitions=3, cluster=True
    )
    try:
        first = pbus.partitions[0]
        await first.redis.get(first.keys.layout)  # one connection to the node, free
        closer = await _race_next_call(first.redis, first.keys.layout)
        await pbus.check_layout()
        await closer
        assert await first.redis.get(first.keys.layout) == b"0/3"
    finally:
        await pbus.aclose()
