"""What the dashboard shows, read from one bus (or every partition of a partitioned one): the stats, the
active leases with their deadline on the server clock, the dead letters with their error, and the
throughput from successive reads of the counters. Read-only, and independent of the web framework.

Each part is read in its own round trips, not in one snapshot: a job that moves between two of them may
show in two tables, or in none, for one refresh. The depths and counters are one consistent snapshot
(stats.lua).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from echomq import rows
from echomq.bus import Bus
from echomq.errors import translate_redis_errors
from echomq.partitions import AnyBus
from echomq.stats import Stats

LEASES_SHOWN = 100  # the active jobs with the soonest deadlines
DEAD_SHOWN = 100  # the oldest dead letters
LANES_SHOWN = 50  # the first lanes of the ring (of each partition)
RATE_WINDOW_S = 10.0  # throughput: the counters' change over about this long
MAX_ERROR = 300  # characters of a dead letter's error shown


@dataclass(frozen=True, slots=True)
class LeaseRow:
    job: str
    lane: str
    owner: str
    attempts: int
    deadline_ms: int  # server ms
    left_ms: int  # deadline less the server's clock when read (negative: expired, awaiting the sweep)


@dataclass(frozen=True, slots=True)
class DeadRow:
    job: str
    lane: str
    tries: int
    dead_ms: int  # server ms of its death
    error: str


@dataclass(frozen=True, slots=True)
class Rates:
    """Jobs per second over the last few reads; None until two reads are at least a second apart."""

    admitted: float | None = None
    completed: float | None = None
    failed: float | None = None  # failures retried, and jobs dead-lettered (counters retried + dead)


@dataclass(frozen=True, slots=True)
class Board:
    tag: str
    stats: Stats
    server_ms: int
    leases: list[LeaseRow] = field(default_factory=list)
    dead: list[DeadRow] = field(default_factory=list)
    rates: Rates = Rates()

    def as_dict(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "server_ms": self.server_ms,
            **self.stats.as_dict(),
            "leases": [vars_of(lease) for lease in self.leases],
            "dead_letters": [vars_of(row) for row in self.dead],
            "throughput": vars_of(self.rates),
        }


def vars_of(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


class Throughput:
    """Rates from successive reads of the counters, in this process (a monotonic clock): each read of the
    board adds one; the rate is over the reads of the last :data:`RATE_WINDOW_S` seconds."""

    def __init__(self) -> None:
        self._reads: deque[tuple[float, int, int, int]] = deque(maxlen=1000)

    def observe(self, counters: dict[str, int], now: float | None = None) -> Rates:
        at = time.monotonic() if now is None else now
        failed = counters.get("retried", 0) + counters.get("dead", 0)
        self._reads.append((at, counters.get("admitted", 0), counters.get("completed", 0), failed))
        while len(self._reads) > 2 and at - self._reads[1][0] >= RATE_WINDOW_S:
            self._reads.popleft()
        first = self._reads[0]
        span = at - first[0]
        if span < 1.0:
            return Rates()
        last = self._reads[-1]
        admitted, completed, failed_rate = ((last[i] - first[i]) / span for i in (1, 2, 3))
        return Rates(admitted=admitted, completed=completed, failed=failed_rate)


def partitions_of(bus: AnyBus) -> list[Bus]:
    return [bus] if isinstance(bus, Bus) else list(bus.partitions)


async def _server_ms(bus: Bus) -> int:
    node: Any = bus.redis
    if bus.is_cluster:  # the node that serves the bus's slot
        seconds, micros = await node.execute_command(
            "TIME", target_nodes=node.get_node_from_key(bus.keys.stats)
        )
    else:
        seconds, micros = await node.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def _leases(bus: Bus, limit: int) -> list[LeaseRow]:
    with translate_redis_errors():
        now = await _server_ms(bus)
        active: list[tuple[bytes, float]] = await bus.redis.zrange(  # type: ignore[assignment]
            bus.keys.active, 0, limit - 1, withscores=True
        )
        fields = await _fields(
            bus, [raw.decode() for raw, _ in active], [rows.LANE, rows.ATTEMPTS, rows.OWNER]
        )
    return [
        LeaseRow(
            job=raw.decode(),
            lane=(lane or b"").decode(),
            owner=(owner or b"").decode("utf-8", "replace"),
            attempts=int(attempts or 0),
            deadline_ms=int(deadline),
            left_ms=int(deadline) - now,
        )
        for (raw, deadline), (lane, attempts, owner) in zip(active, fields, strict=True)
    ]


async def _fields(bus: Bus, jobs: list[str], names: list[str]) -> list[list[bytes | None]]:
    """``names`` of each job's row, in one round trip."""
    if not jobs:
        return []
    pipe: Any
    async with bus.redis.pipeline(transaction=False) as pipe:
        for job in jobs:
            pipe.hmget(bus.keys.job(job), names)
        replies: list[list[bytes | None]] = await pipe.execute()
    return replies


async def _dead(bus: Bus, limit: int) -> list[DeadRow]:
    listed = await bus.dead_jobs(limit)
    with translate_redis_errors():
        fields = await _fields(bus, [job for job, _ in listed], [rows.LANE, rows.TRIES, rows.ERROR])
    found = []
    for (job, at), (lane, tries, error) in zip(listed, fields, strict=True):
        text = (error or b"").decode("utf-8", "replace")
        found.append(
            DeadRow(
                job=job,
                lane=(lane or b"").decode(),
                tries=int(tries or 0),
                dead_ms=at,
                error=text if len(text) <= MAX_ERROR else text[:MAX_ERROR] + "…",
            )
        )
    return found


async def read_board(bus: AnyBus, throughput: Throughput) -> Board:
    """Everything the page shows, read now (see the module doc); raises the bus's errors
    (:class:`~echomq.errors.RedisUnavailable` when Redis cannot be reached)."""
    stats = await bus.stats(lanes=LANES_SHOWN)
    parts = partitions_of(bus)
    leases = [row for part in parts for row in await _leases(part, LEASES_SHOWN)]
    leases.sort(key=lambda row: (row.deadline_ms, row.job))
    dead = [row for part in parts for row in await _dead(part, DEAD_SHOWN)]
    dead.sort(key=lambda row: (row.dead_ms, row.job))
    return Board(
        tag=bus.tag,
        stats=stats,
        server_ms=await _server_ms(parts[0]),
        leases=leases[:LEASES_SHOWN],
        dead=dead[:DEAD_SHOWN],
        rates=throughput.observe(stats.counters),
    )
