"""Dead letters: retry or delete one, or retry (delete) every dead job once from a snapshot of the dead set.

Guarantees provided here:

* **Only a dead job moves.** :func:`retry_dead` is one script: a dead row goes back to its lane (at its
  mint position) with a fresh budget of tries, its attempts token still counting up, so no claim from
  before its death can finish it. Anything else (queued, active, done, a trimmed tombstone) is left
  alone and answered ``False``.
* **A lost reply tells the truth.** Every call carries a request id that the row keeps when it moves.
  A call retried after its reply was lost (redis-py retries on a broken connection) finds its own id
  and answers ``True`` without moving the job again, even if a worker has dead-lettered it since.
* **``retry_all_dead`` retries each dead job once.** It reads the ids of the dead set once (ZSCAN, so a
  large set is read in steps and Redis is never blocked by one huge reply), then retries them in
  batches under one request id. A job that a worker dead-letters again while the run goes on is not
  retried again by it (it is not re-read, and the script refuses a second move under the same id), and
  the report names exactly the jobs this run moved.
* **Only a dead letter is deleted, and its id is still remembered.** :func:`delete_dead` is one script
  (``lua/delete_dead.lua``): a dead row leaves the dead set and is reduced to its tombstone, as the
  trim reduces one, counting until one dedup window after the deletion. So a stale producer's retry of
  the same id within that window is answered ``DUPLICATE`` (or ``CONFLICT``) and never runs the job
  again, and a finish of an old claim is still refused. Anything not dead is left alone (``REFUSED``).
* **A lost delete tells the truth.** Its retry finds the tombstone and answers ``ALREADY`` (no dead
  letter left): the same answer as for one deleted by another caller, or trimmed at its dead ttl. With
  a dedup window of 0 no tombstone is kept, and such a retry raises :class:`~echomq.errors.UnknownJob`.
* **``delete_all_dead`` deletes a snapshot**, in batches as :func:`retry_all_dead`; the report names
  the jobs this run deleted (a job retried by someone else meanwhile is not dead, and stays).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq import ids
from echomq._validate import check_int
from echomq.errors import RedisUnavailable, translate_redis_errors
from echomq.jobs import reply_code, run_each
from echomq.keyspace import JOB_BRAND
from echomq.states import Deletion

if TYPE_CHECKING:
    from echomq.core import BusCore, Settings
    from echomq.keyspace import Keyspace

DEFAULT_BATCH = 500  # retries (deletions) per round trip in retry_all_dead (delete_all_dead)
_MOVED = (1, 2)  # moved now, or by this very request before (a retried call)
_DELETIONS = {1: Deletion.DELETED, 2: Deletion.ALREADY, 0: Deletion.REFUSED}


@dataclass(frozen=True, slots=True)
class DeadRetry:
    """What one :func:`retry_all_dead` run did: the dead ids it read, and those it moved to lanes."""

    listed: int  # ids in the snapshot of the dead set
    moved: tuple[str, ...]  # the jobs this run returned to their lanes, oldest death first


@dataclass(frozen=True, slots=True)
class DeadDeletion:
    """What one :func:`delete_all_dead` run did: the dead ids it read, and those it deleted."""

    listed: int  # ids in the snapshot of the dead set
    deleted: tuple[str, ...]  # the jobs this run deleted, oldest death first


def new_request() -> str:
    """A fresh request id for the retry_dead calls of one request."""
    return secrets.token_hex(12)


def retry_dead_call(bus: BusCore, job: str, request: str) -> tuple[list[str], list[Any]]:
    """Keys and args of one retry_dead.lua call, every input checked."""
    keys = bus.keys
    job_key = keys.job(job)
    return (
        [job_key, keys.dead, keys.ring, keys.wake, keys.stats, keys.waiting],
        [job, keys.prefix, bus.settings.wake_cap, request],
    )


async def retry_dead(bus: BusCore, job: str) -> bool:
    """Return a dead job to its lane with a fresh budget of tries; False if it is not dead.

    A lost reply, retried, answers ``True`` (this call moved it); see the module doc. On a cluster whose
    slot is being resharded, a job whose lane is not on the node that runs the script stays dead and
    :class:`RedisUnavailable` says to try again later (in :func:`retry_dead_many` it is not moved)."""
    keys, args = retry_dead_call(bus, job, new_request())
    with translate_redis_errors():
        reply = await bus.scripts.run("retry_dead", keys, args)
    code = reply_code("retry_dead", reply, job)
    if code == -3:
        raise RedisUnavailable(f"the bus's slot is being resharded: job {job} stays dead, try again later")
    return code in _MOVED


async def retry_dead_many(bus: BusCore, jobs: Sequence[str], request: str) -> list[bool]:
    """:func:`retry_dead` for each of ``jobs`` in one round trip, under ``request``; a job with no row
    (its tombstone expired) is ``False`` here rather than an error."""
    calls = [retry_dead_call(bus, job, request) for job in jobs]
    if not calls:
        return []
    with translate_redis_errors():
        if bus.is_cluster:
            replies = await run_each(bus, "retry_dead", calls)
        else:
            async with bus.redis.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    await bus.scripts.run("retry_dead", keys, args, client=pipe)
                replies = await pipe.execute()
    return [int(reply[0]) in _MOVED for reply in replies]


async def dead_snapshot(bus: BusCore) -> list[str]:
    """The ids in the dead set, read once (ZSCAN), oldest death first; an entry that is not a JOB id
    (a foreign write) is left out."""
    with translate_redis_errors():
        return oldest_first([pair async for pair in bus.redis.zscan_iter(bus.keys.dead, count=1000)])


def oldest_first(pairs: Iterable[tuple[Any, float]]) -> list[str]:
    """The JOB ids of ZSCAN's ``(member, score)`` pairs of the dead set (each once, a foreign entry left
    out), oldest death first, ties by id."""
    seen: dict[str, float] = {}
    for raw, score in pairs:
        job = raw.decode() if isinstance(raw, bytes) else str(raw)
        if ids.is_valid(job, JOB_BRAND):
            seen[job] = score
    return sorted(seen, key=lambda job: (seen[job], job))


async def retry_all_dead(bus: BusCore, *, batch: int = DEFAULT_BATCH) -> DeadRetry:
    """Retry every job of a snapshot of the dead set once, ``batch`` per round trip; see the module doc.

    A lost reply inside a batch, retried, is answered truthfully (the request id); a run cut short
    (Redis gone) has moved some jobs and raised: run it again, it retries only what is still dead."""
    check_int("batch", batch, 1, 10_000)
    request = new_request()
    snapshot = await dead_snapshot(bus)
    moved: list[str] = []
    for start in range(0, len(snapshot), batch):
        chunk = snapshot[start : start + batch]
        flags = await retry_dead_many(bus, chunk, request)
        moved.extend(job for job, flag in zip(chunk, flags, strict=True) if flag)
    return DeadRetry(listed=len(snapshot), moved=tuple(moved))


def delete_dead_call(keys: Keyspace, settings: Settings, job: str) -> tuple[list[str], list[Any]]:
    """Keys and args of one delete_dead.lua call, every input checked (shared by both buses)."""
    return [keys.job(job), keys.dead, keys.stats], [job, keys.prefix, settings.dedup_window_ms]


def deletion(reply: Any, job: str) -> Deletion:
    """What a delete_dead.lua reply reports (no row nor tombstone: :class:`~echomq.errors.UnknownJob`)."""
    return _DELETIONS[reply_code("delete_dead", reply, job)]


def deletions(jobs: Sequence[str], replies: Sequence[Any]) -> list[str]:
    """The ``jobs`` that a batch of delete_dead.lua ``replies`` deleted now (an id whose tombstone
    expired meanwhile, -1, is not deleted rather than an error; an error reply raises)."""
    deleted = []
    for job, reply in zip(jobs, replies, strict=True):
        if isinstance(reply, Exception):
            raise reply
        if int(reply[0]) == 1:
            deleted.append(job)
    return deleted


async def delete_dead(bus: BusCore, job: str) -> Deletion:
    """Delete a dead letter, leaving its tombstone: ``DELETED``, ``ALREADY`` or ``REFUSED`` (see the
    module doc); :class:`~echomq.errors.UnknownJob` when the id has neither row nor tombstone."""
    keys, args = delete_dead_call(bus.keys, bus.settings, job)
    with translate_redis_errors():
        return deletion(await bus.scripts.run("delete_dead", keys, args), job)


async def delete_all_dead(bus: BusCore, *, batch: int = DEFAULT_BATCH) -> DeadDeletion:
    """Delete every job of a snapshot of the dead set, ``batch`` per round trip; see the module doc.

    A run cut short (Redis gone) has deleted some jobs and raised: run it again, it deletes only what
    is still dead (a lost reply inside a batch is answered ``ALREADY`` by its retry, not reported)."""
    check_int("batch", batch, 1, 10_000)
    snapshot = await dead_snapshot(bus)
    deleted: list[str] = []
    for start in range(0, len(snapshot), batch):
        chunk = snapshot[start : start + batch]
        calls = [delete_dead_call(bus.keys, bus.settings, job) for job in chunk]
        with translate_redis_errors():
            if bus.is_cluster:
                replies = await run_each(bus, "delete_dead", calls, return_exceptions=True)
            else:
                replies = await bus.scripts.run_many("delete_dead", calls)
            deleted.extend(deletions(chunk, replies))
    return DeadDeletion(listed=len(snapshot), deleted=tuple(deleted))
