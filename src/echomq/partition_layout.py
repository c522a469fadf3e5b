"""The layout of a partitioned bus (:mod:`echomq.partitions`): which partition a lane is in, the
partitions' tags and recorded place ``i/P``, and the gate that bounds the calls sent to every partition
at once; the merge of their stats.
"""

from __future__ import annotations

import asyncio
import functools
import zlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from echomq._validate import check_int
from echomq.errors import InvalidOption, translate_redis_errors
from echomq.keyspace import check_lane, check_tag
from echomq.stats import Stats

if TYPE_CHECKING:
    from echomq.bus import Bus

MAX_PARTITIONS = 1024
MERGED_CALLS = 16  # calls of a merged read (stats, sweep, dead letters) in flight at once, at most
MAX_REQUEST = 64  # a claim request id's length (echomq.keyspace.check_request)


def partition_of(lane: str, partitions: int) -> int:
    """The partition of ``lane`` among ``partitions``: CRC-32 of its name, modulo P (stable everywhere)."""
    return zlib.crc32(check_lane(lane).encode()) % partitions


def partition_tags(tag: str, partitions: int) -> list[str]:
    """The tags of the partitions of the bus ``tag``: ``<tag>.0`` ... ``<tag>.<P-1>`` (each checked)."""
    check_int("partitions", partitions, 1, MAX_PARTITIONS)
    return [check_tag(f"{check_tag(tag)}.{i}") for i in range(partitions)]


def merge_stats(parts: list[Stats], lanes: int) -> Stats:
    counters: dict[str, int] = {}
    for part in parts:
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
    lane_rows = sorted((row for part in parts for row in part.lanes), key=lambda r: (-r.depth, r.lane))
    return Stats(
        counters=counters,
        queued=sum(p.queued for p in parts),
        delayed=sum(p.delayed for p in parts),
        active=sum(p.active for p in parts),
        done=sum(p.done for p in parts),
        dead=sum(p.dead for p in parts),
        lanes=lane_rows[:lanes],
        lanes_total=sum(p.lanes_total for p in parts),
        lag_max=max((p.lag_max for p in parts), default=0),
    )


T = TypeVar("T")


def merged_gate(pool: int) -> asyncio.Semaphore:
    """The gate of one partitioned bus's calls to every partition: :data:`MERGED_CALLS` at most, and a
    quarter of the client's pool (those calls' own batches take up to half)."""
    return asyncio.Semaphore(max(1, min(MERGED_CALLS, pool // 4)))


async def gated(gate: asyncio.Semaphore, calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run ``calls`` concurrently through ``gate``; their results in order; the first error cancels the
    rest (none is left holding a connection)."""

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    tasks = [asyncio.ensure_future(one(call)) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def check_partition(partitions: list[Bus], i: int) -> None:
    """Partition ``i`` keeps ``i/P`` (its ``layout`` key, written by its first user); raise
    :class:`~echomq.errors.InvalidOption` when it belongs to a bus of another P: a lane's partition is
    a function of P, so with another P a job would be claimed from one partition and finished on another
    (refused, and run again)."""
    size = len(partitions)
    bus = partitions[i]
    with translate_redis_errors():
        await bus.redis.set(bus.keys.layout, f"{i}/{size}", nx=True)
        raw = await bus.redis.get(bus.keys.layout)
    found = raw.decode() if isinstance(raw, bytes) else str(raw)
    if raw is not None and found != f"{i}/{size}":
        raise InvalidOption(
            f"partition {bus.tag} belongs to a bus of {found.split('/')[-1]} partitions,"
            f" not {size}: open it with that count (see echomq.partitions, growing P)"
        )


async def check_layout(partitions: list[Bus], gate: asyncio.Semaphore) -> None:
    """:func:`check_partition` on every partition."""
    await gated(gate, [functools.partial(check_partition, partitions, i) for i in range(len(partitions))])


async def recorded(
    partitions: list[Bus], request: str, order: list[int], gate: asyncio.Semaphore
) -> list[int]:
    """The partitions (in ``order``) holding a claim record of ``request`` (``<request>.<p>``)."""

    async def held(p: int) -> bool:
        bus = partitions[p]
        with translate_redis_errors():
            return bool(await bus.redis.exists(bus.keys.claim_record(f"{request}.{p}")))

    found = await gated(gate, [functools.partial(held, p) for p in order])
    return [p for p, there in zip(order, found, strict=True) if there]
