"""Inspection: what a job's row (or, once trimmed, its tombstone) says, under the documented names.

:func:`inspect` reads the row (:mod:`echomq.rows` maps its one-letter fields back) and names the key
that holds the job; a trimmed job is read from its tombstone, which keeps its state and attempts only.
Read-only: nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from redis.asyncio import RedisCluster

from echomq import ids, rows
from echomq.errors import UnknownJob, translate_redis_errors
from echomq.states import JobState

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.jobs import Admitting


@dataclass(frozen=True, slots=True)
class JobInfo:
    """A job's row and location, as :func:`inspect` found it."""

    job: str
    state: JobState
    lane: str
    location: str | None  # the key holding the id; None for a trimmed tombstone
    attempts: int
    tries: int
    max_attempts: int
    priority: int | None
    created_ms: int | None
    deadline_ms: int | None
    finished_ms: int | None
    late_ms: int | None  # how late the latest claim of a job promoted from delayed started (server clock)
    owner: str | None
    error: str | None
    payload: bytes | None
    result: bytes | None
    trimmed: bool


def _location(bus: Admitting, state: JobState, lane: str) -> str:
    keys = bus.keys
    return {
        JobState.QUEUED: keys.lane(lane),
        JobState.DELAYED: keys.delayed,
        JobState.ACTIVE: keys.active,
        JobState.DONE: keys.done,
        JobState.DEAD: keys.dead,
    }[state]


def _opt_int(row: dict[str, bytes], field: str) -> int | None:
    value = row.get(field)
    return None if value is None else int(value)


def _opt_str(row: dict[str, bytes], field: str) -> str | None:
    value = row.get(field)
    return None if value is None else value.decode("utf-8", "replace")


async def inspect(bus: BusCore, job: str) -> JobInfo:
    """Read a job's row and confirm its location; raises :class:`UnknownJob` if there is no row.

    The row's stored fields are short (:mod:`echomq.rows`); this maps them back to the documented names.
    The admission time is the row's when the application wrote one, else the id's mint time."""
    job_key = bus.keys.job(job)
    with translate_redis_errors():
        raw: dict[bytes, bytes] = await bus.redis.hgetall(job_key)  # type: ignore[assignment]
        info = row_info(bus, job, raw)
        if info is not None:
            return info
        key, field = bus.keys.tombstone(job)
        if isinstance(bus.redis, RedisCluster):  # its pipeline refuses TIME: the slot's node's clock
            value = cast(bytes | None, await bus.redis.hget(key, field))
            node = bus.redis.get_node_from_key(key)
            now = await bus.redis.execute_command("TIME", target_nodes=node)
        else:
            async with bus.redis.pipeline(transaction=False) as pipe:
                pipe.hget(key, field)
                pipe.time()
                value, now = await pipe.execute()
    return tombstone_info(bus, job, value, now)


def row_info(bus: Admitting, job: str, raw: dict[bytes, bytes]) -> JobInfo | None:
    """The :class:`JobInfo` of ``job``'s row as HGETALL read it, or None when it has no row (then its
    tombstone tells: :func:`tombstone_info`). Shared by the asyncio and the blocking bus."""
    row = rows.decode(raw)
    if not row:
        return None
    state = JobState(row["state"].decode())
    lane = row["lane"].decode()
    trimmed = "trimmed" in row
    location = None if trimmed else _location(bus, state, lane)
    created = _opt_int(row, "created")
    return JobInfo(
        job=job,
        state=state,
        lane=lane,
        location=location,
        attempts=int(row.get("attempts", b"0")),
        tries=int(row.get("tries", b"0")),
        max_attempts=int(row.get("max", b"0")),
        priority=_opt_int(row, "priority"),
        created_ms=ids.timestamp_ms(job) if created is None else created,
        deadline_ms=_opt_int(row, "deadline"),
        finished_ms=_opt_int(row, "finished"),
        late_ms=_opt_int(row, "late"),
        owner=_opt_str(row, "owner"),
        error=_opt_str(row, "error"),
        payload=row.get("payload"),
        result=row.get("result"),
        trimmed=trimmed,
    )


def tombstone_info(bus: Admitting, job: str, value: bytes | None, now: tuple[int, int]) -> JobInfo:
    """The tombstone of a trimmed job (its field ``value``, read at server ``now`` = TIME's reply), as
    :func:`inspect` shows it: its lane and payload are gone (the lane is ''), its finish time is its
    expiry less the bus's dedup window. Raises :class:`UnknownJob` when there is none or it expired."""
    seconds, micros = now
    tomb = rows.parse_tombstone(value)
    if tomb is None or tomb.expires_ms <= int(seconds) * 1000 + int(micros) // 1000:
        raise UnknownJob(f"no job {job}: never admitted, or its tombstone expired")
    return JobInfo(
        job=job,
        state=JobState(tomb.state.decode()),
        lane="",
        location=None,
        attempts=tomb.attempts,
        tries=0,
        max_attempts=0,
        priority=None,
        created_ms=ids.timestamp_ms(job),
        deadline_ms=None,
        finished_ms=tomb.expires_ms - bus.settings.dedup_window_ms,
        late_ms=None,
        owner=None,
        error=None,
        payload=None,
        result=None,
        trimmed=True,
    )
