"""Helpers of the tests on a real local cluster with partitions: a tag whose partitions land on every
master, which master serves a key now (and echomq.testing.reshard's move_slot, re-exported)."""

from __future__ import annotations

import contextlib

import redis
from redis.crc import key_slot

from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import move_slot  # noqa: F401  (re-exported for the tests)

# The local cluster gives each of three masters a third of the slots, in order; redis-cli and the
# ADDSLOTS fallback draw the borders a slot apart, so a slot within a slot of one is nobody's third here.
BORDERS = (5461, 10922)


def _third(slot: int) -> int | None:
    if any(abs(slot - border) <= 1 for border in BORDERS):
        return None
    return sum(slot > border for border in BORDERS)


def spread_tag(prefix: str, partitions: int = 3) -> str:
    """A tag (``<prefix><n>``) whose ``partitions`` partitions' slots fall in three different thirds of
    the slot space, so on a fresh three-master cluster each partition is on a master of its own."""
    for n in range(100_000):
        tag = f"{prefix}{n}"
        thirds = {_third(key_slot(f"emq:{{{tag}.{p}}}:ring".encode())) for p in range(partitions)}
        if len(thirds) == 3 and None not in thirds:
            return tag
    raise AssertionError(f"no tag {prefix}<n> spreads over three masters")


def slot_master(cluster: RedisClusterProcesses, key: str) -> int:
    """The port of the master that serves ``key``'s slot now, as the first live node answers."""
    slot = key_slot(key.encode())
    for port in cluster.all_ports:
        with contextlib.suppress(redis.RedisError), redis.Redis(port=port, socket_timeout=2) as client:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
    raise AssertionError("no node of the cluster answers")
