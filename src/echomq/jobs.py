"""Admission and the fenced finish: enqueue, complete, fail, extend, release, inspect.

Guarantees provided here:

* **Idempotent admission.** :func:`enqueue` is one script keyed by the branded JOB id. A second enqueue
  of the same id with the same lane and payload is ``Admission.DUPLICATE`` and changes nothing; the same
  id with another lane or payload is ``Admission.CONFLICT`` and changes nothing (it is never silently
  dropped or overwritten). Duplicates are absorbed for the bus's dedup window after the job finished
  (default 24 h): the row is kept whole for ``result_ttl_ms`` (default 1 h), then trimmed to a
  tombstone of a few fields (state, lane, payload digest, attempts) that expires at the window's end.
  After that the same id would be admitted anew. Dead rows are kept whole for ``dead_ttl_ms`` (180
  days) for inspection and :func:`echomq.dead.retry_dead`, then trimmed the same way.
* **Retention keeps up with any throughput.** Trimming is amortised with the work: each
  :func:`complete` (and each application script that completes through the ``finish`` include, as
  codemojex's score does) first trims up to two done rows past the result ttl, oldest first; each
  :func:`fail` that dead-letters trims up to two dead rows past the dead ttl; every sweep trims up to its
  limit of each set, whether or not it holds the sweep lock. A finish adds one row and trims up to two,
  so rows past their ttl never pile up, and memory stays flat at any speed: about the rows finished
  within one result ttl (whole) plus those finished within one dedup window (tombstones).
* **Fenced finish.** Every finishing call (:func:`complete`, :func:`fail`, :func:`release`) carries the
  claim's attempts token and is refused (``STALE``) unless the job is active under that very token. A
  worker whose lease was reaped, even if the job was re-claimed by another worker, cannot finish it.
  :func:`extend` answers ``Lease.REVOKED`` in the same case, so a worker can stop before side effects.
* **Lost replies.** Any call can run in Redis and its reply never arrive (a timeout, a cut connection,
  a Redis pause longer than the socket timeout); redis-py may retry the command (a client made as
  ``Redis(host=...)`` does, 10 times; one made by ``from_url`` does not) and the worker retries its
  finishing calls.
  Every call here is safe to retry and its retry answers truthfully, as each function's docstring says:
  a retried finish of this very claim is told what that claim's first call did (``DONE``, ``RETRYING``,
  ``DEAD``, ``RELEASED``), never ``STALE``: a completion is read from the row (done under the token),
  a fail or release from the row's ``ended`` words (the last 4 fail/release endings, by token).
* **When a handler runs twice.** Delivery is at least once: a handler whose worker dies, stalls past its
  lease, or loses its connection after the effect and before :func:`complete` is run again by the next
  claimant. Make the effect idempotent on the job id (as codemojex does), or do the effect and the
  completion in one script.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq import ids
from echomq._validate import check_int
from echomq.errors import (
    InvalidLane,
    InvalidOption,
    InvalidPayload,
    InvalidToken,
    PayloadTooLarge,
    ScriptError,
    UnknownJob,
    translate_redis_errors,
)
from echomq.keyspace import JOB_BRAND, check_lane
from echomq.scripts import finish_args
from echomq.states import Admission, Failure, Finish, JobState, Lease, Release

if TYPE_CHECKING:
    from echomq.bus import Bus

MAX_ATTEMPTS_LIMIT = 1000
PRIORITY_LIMIT = 1_000_000
MAX_DELAY_MS = 365 * 24 * 3600 * 1000
MAX_LEASE_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Claim:
    """A job held by a worker under ``token`` until ``deadline_ms`` (server clock).

    Only ``job``, ``lane`` and ``token`` matter to the finishing calls, so a process that learned them
    elsewhere can build a Claim to finish (and will be refused as stale if the lease moved on).
    """

    job: str
    lane: str
    token: int
    payload: bytes = b""
    deadline_ms: int = 0
    tries: int = 0
    max_attempts: int = 0


@dataclass(frozen=True, slots=True)
class NewJob:
    """One job for :func:`enqueue_many`."""

    job: str
    lane: str
    payload: bytes
    max_attempts: int = 5
    priority: int = 0
    delay_ms: int = 0


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


def check_token(token: object) -> int:
    """Return ``token`` if it is a positive int (not a bool), else raise :class:`InvalidToken`."""
    if isinstance(token, bool) or not isinstance(token, int) or token < 1:
        raise InvalidToken(f"an attempts token is a positive int, got {token!r}")
    return token


def check_claim(claim: object) -> Claim:
    """Validate a claim's id, lane and token before any key is built from them."""
    if not isinstance(claim, Claim):
        raise InvalidToken(f"expected a Claim, got {type(claim).__name__}")
    ids.check(claim.job, JOB_BRAND)
    check_lane(claim.lane)
    check_token(claim.token)
    return claim


def _check_bytes(name: str, value: object, limit: int) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidPayload(f"{name} is bytes, got {type(value).__name__}")
    data = bytes(value)
    if len(data) > limit:
        raise PayloadTooLarge(f"{name} is {len(data)} bytes, over the limit of {limit}")
    return data


def enqueue_call(bus: Bus, spec: NewJob) -> tuple[list[str], list[Any]]:
    """Keys and args of one enqueue.lua call, every input checked (shared with the benchmark)."""
    keys = bus.keys
    job_key = keys.job(spec.job)
    lane_key = keys.lane(spec.lane)
    payload = _check_bytes("payload", spec.payload, bus.settings.max_payload)
    max_attempts = check_int("max_attempts", spec.max_attempts, 1, MAX_ATTEMPTS_LIMIT)
    priority = check_int("priority", spec.priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
    delay_ms = check_int("delay_ms", spec.delay_ms, 0, MAX_DELAY_MS)
    return (
        [job_key, lane_key, keys.ring, keys.delayed, keys.wake, keys.stats, keys.waiting],
        [spec.job, spec.lane, payload, max_attempts, priority, delay_ms, bus.settings.wake_cap],
    )


_ADMISSION = {1: Admission.ADMITTED, 0: Admission.DUPLICATE, -1: Admission.CONFLICT}


def _admission(reply: Any) -> Admission:
    try:
        return _ADMISSION[int(reply[0])]
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"enqueue.lua answered {reply!r}") from exc


async def enqueue(
    bus: Bus,
    job: str,
    *,
    lane: str,
    payload: bytes,
    max_attempts: int = 5,
    priority: int = 0,
    delay_ms: int = 0,
) -> Admission:
    """Admit ``job`` on ``lane`` once; see the module doc for duplicate and conflict.

    Lost reply: the job is admitted; the retry (same id, lane and payload) answers ``DUPLICATE`` and
    changes nothing, so treat ``DUPLICATE`` as success."""
    keys, args = enqueue_call(bus, NewJob(job, lane, payload, max_attempts, priority, delay_ms))
    with translate_redis_errors():
        return _admission(await bus.scripts.run("enqueue", keys, args))


async def run_each(
    bus: Bus, name: str, calls: list[tuple[list[str], list[Any]]], *, return_exceptions: bool = False
) -> list[Any]:
    """Run script ``name`` once per ``(keys, args)``, concurrently, one call each: a batch on a cluster,
    where redis-py's pipeline refuses scripts. With ``return_exceptions`` a failed call's exception is its
    reply; else the first one raises (untranslated)."""
    # A cold cluster client that discovers the cluster under many concurrent first calls can hand a
    # half-made connection to one of them (redis-py 8.1); discovering first, once, avoids it.
    await bus.redis.initialize()
    runs = (bus.scripts.run(name, keys, args) for keys, args in calls)
    return await asyncio.gather(*runs, return_exceptions=return_exceptions)


async def enqueue_many(bus: Bus, jobs: Iterable[NewJob]) -> list[Admission]:
    """Admit many jobs in one round trip; each is its own idempotent script (not one transaction).

    Every job is validated before anything is sent, so bad input changes nothing. On a cluster the
    scripts go concurrently, one call each (redis-py's cluster pipeline refuses scripts).
    Lost reply: some or all were admitted; the retry answers ``DUPLICATE`` for those and admits the rest.
    """
    calls = [enqueue_call(bus, spec) for spec in jobs]
    if not calls:
        return []
    with translate_redis_errors():
        if bus.is_cluster:
            replies = await run_each(bus, "enqueue", calls)
            return [_admission(reply) for reply in replies]
        async with bus.redis.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                await bus.scripts.run("enqueue", keys, args, client=pipe)
            replies = await pipe.execute()
    return [_admission(reply) for reply in replies]


def _code(name: str, reply: Any, job: str) -> int:
    """The reply code of a script keyed by ``job``; the codes every script shares become errors here:
    -1 no row (:class:`UnknownJob`), -2 a claim naming another lane than the row's (:class:`InvalidLane`).
    """
    try:
        code: int = int(reply[0])
    except (TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"{name}.lua answered {reply!r}") from exc
    if code == -1:
        raise UnknownJob(f"no job {job}: never admitted, or its tombstone expired")
    if code == -2:
        raise InvalidLane(f"the claim names another lane than job {job}'s, which is {reply[1].decode()!r}")
    return code


def complete_call(bus: Bus, claim: Claim, result: bytes) -> tuple[list[str], list[Any]]:
    """Keys and args of one complete.lua call (shared with the worker's batched completions): the
    claim, the result, and :func:`echomq.scripts.finish_args` (the bus prefix, result ttl and dedup
    window that the trim of expired done rows needs)."""
    check_claim(claim)
    data = _check_bytes("result", result, bus.settings.max_payload)
    keys = bus.keys
    return (
        [keys.job(claim.job), keys.active, keys.done, keys.stats],
        [claim.job, claim.token, data, *finish_args(bus)],
    )


def finish_outcome(claim: Claim, reply: Any) -> Finish:
    """Read a complete.lua reply (4: already completed by this very claim, a retry after a lost reply)."""
    code = _code("complete", reply, claim.job)
    return Finish.DONE if code in (1, 4) else Finish.STALE


async def complete(bus: Bus, claim: Claim, result: bytes = b"") -> Finish:
    """Finish ``claim``: ``Finish.DONE``, or ``Finish.STALE`` if the lease is no longer this claim's.

    A DONE complete first trims up to two done rows past the result ttl (see the module doc); a STALE
    one changes nothing but the ``stale`` counter. Lost reply: the job is done and those rows trimmed;
    the retry finds the job done under this claim's token and answers ``DONE``, changing nothing and
    trimming nothing (even after the row was trimmed to its tombstone), so no row is trimmed or counted
    twice."""
    keys, args = complete_call(bus, claim, result)
    with translate_redis_errors():
        reply = await bus.scripts.run("complete", keys, args)
    return finish_outcome(claim, reply)


def backoff_ms(bus: Bus, tries: int) -> int:
    """Exponential backoff with equal jitter: half the step is fixed, half is random."""
    settings = bus.settings
    step = min(settings.backoff_cap_ms, settings.backoff_base_ms * (2 ** max(0, min(tries, 40) - 1)))
    half: int = step // 2
    return half + random.randint(0, step - half)


async def fail(
    bus: Bus,
    claim: Claim,
    error: str,
    *,
    retryable: bool = True,
    delay_ms: int | None = None,
) -> Failure:
    """Record a failed try: retry after ``delay_ms`` (default: backoff), or dead-letter past max attempts.

    A fail that dead-letters first trims up to two dead rows past the dead ttl (see the module doc).
    Lost reply: the try is recorded (and those rows trimmed); the retry finds this claim's ending on the
    row and answers the same ``RETRYING`` (or ``DEAD``), changing nothing, even if the job was claimed
    again since (unless 4 later claims also failed or were released: then ``STALE``)."""
    check_claim(claim)
    if not isinstance(error, str):
        raise InvalidPayload(f"error is a str, got {type(error).__name__}")
    if not isinstance(retryable, bool):  # int("no") would escape the error tree; 0 would dead-letter
        raise InvalidOption(f"retryable is a bool, got {retryable!r}")
    delay = backoff_ms(bus, claim.tries or claim.token) if delay_ms is None else delay_ms
    delay = check_int("delay_ms", delay, 0, MAX_DELAY_MS)
    keys = bus.keys
    with translate_redis_errors():
        reply = await bus.scripts.run(
            "fail",
            [
                keys.job(claim.job),
                keys.active,
                keys.delayed,
                keys.dead,
                keys.lane(claim.lane),
                keys.ring,
                keys.wake,
                keys.stats,
                keys.waiting,
            ],
            [
                claim.job,
                claim.token,
                error[:4096],
                delay,
                int(retryable),
                claim.lane,
                bus.settings.wake_cap,
                keys.prefix,
                bus.settings.dead_ttl_ms,
                bus.settings.dedup_window_ms,
            ],
        )
    code = _code("fail", reply, claim.job)
    return {1: Failure.RETRYING, 2: Failure.DEAD, 3: Failure.RETRYING, 4: Failure.DEAD}.get(
        code, Failure.STALE
    )


def extend_call(bus: Bus, claim: Claim, lease_ms: int) -> tuple[list[str], list[Any]]:
    """Keys and args of one extend.lua call (shared with the lease keeper's blocking client)."""
    check_claim(claim)
    lease = check_int("lease_ms", lease_ms, 1, MAX_LEASE_MS)
    keys = bus.keys
    return [keys.job(claim.job), keys.active, keys.stats], [claim.job, claim.token, lease]


def lease_outcome(claim: Claim, reply: Any) -> Lease:
    """Read an extend.lua reply."""
    code = _code("extend", reply, claim.job)
    return {1: Lease.EXTENDED, 2: Lease.FINISHED}.get(code, Lease.REVOKED)


async def extend(bus: Bus, claim: Claim, lease_ms: int) -> Lease:
    """Renew the lease to server now + ``lease_ms``; ``Lease.REVOKED`` if it was reaped,
    ``Lease.FINISHED`` if this very claim already completed the job.

    Lost reply: the lease was renewed; the retry renews it again from the server's now (``EXTENDED``)."""
    keys, args = extend_call(bus, claim, lease_ms)
    with translate_redis_errors():
        reply = await bus.scripts.run("extend", keys, args)
    return lease_outcome(claim, reply)


async def release(bus: Bus, claim: Claim) -> Release:
    """Hand ``claim`` back to its lane now, without counting the try.

    Lost reply: the job is back in its lane; the retry finds this claim's release on the row and
    answers ``RELEASED``, changing nothing (the same limit of 4 later endings as :func:`fail`)."""
    check_claim(claim)
    keys = bus.keys
    with translate_redis_errors():
        reply = await bus.scripts.run(
            "release",
            [
                keys.job(claim.job),
                keys.active,
                keys.lane(claim.lane),
                keys.ring,
                keys.wake,
                keys.stats,
                keys.waiting,
            ],
            [claim.job, claim.token, claim.lane, bus.settings.wake_cap],
        )
    code = _code("release", reply, claim.job)
    return Release.RELEASED if code in (1, 3) else Release.STALE


def _location(bus: Bus, state: JobState, lane: str) -> str:
    keys = bus.keys
    return {
        JobState.QUEUED: keys.lane(lane),
        JobState.DELAYED: keys.delayed,
        JobState.ACTIVE: keys.active,
        JobState.DONE: keys.done,
        JobState.DEAD: keys.dead,
    }[state]


def _opt_int(row: dict[bytes, bytes], field: bytes) -> int | None:
    value = row.get(field)
    return None if value is None else int(value)


def _opt_str(row: dict[bytes, bytes], field: bytes) -> str | None:
    value = row.get(field)
    return None if value is None else value.decode("utf-8", "replace")


async def inspect(bus: Bus, job: str) -> JobInfo:
    """Read a job's row and confirm its location; raises :class:`UnknownJob` if there is no row."""
    job_key = bus.keys.job(job)
    with translate_redis_errors():
        row: dict[bytes, bytes] = await bus.redis.hgetall(job_key)  # type: ignore[assignment]
    if not row:
        raise UnknownJob(f"no job {job}: never admitted, or its tombstone expired")
    state = JobState(row[b"state"].decode())
    lane = row[b"lane"].decode()
    trimmed = b"trimmed" in row
    location = None if trimmed else _location(bus, state, lane)
    return JobInfo(
        job=job,
        state=state,
        lane=lane,
        location=location,
        attempts=int(row.get(b"attempts", b"0")),
        tries=int(row.get(b"tries", b"0")),
        max_attempts=int(row.get(b"max", b"0")),
        priority=_opt_int(row, b"priority"),
        created_ms=_opt_int(row, b"created"),
        deadline_ms=_opt_int(row, b"deadline"),
        finished_ms=_opt_int(row, b"finished"),
        late_ms=_opt_int(row, b"late"),
        owner=_opt_str(row, b"owner"),
        error=_opt_str(row, b"error"),
        payload=row.get(b"payload"),
        result=row.get(b"result"),
        trimmed=trimmed,
    )


def claims_from_reply(reply: Sequence[Any]) -> list[Claim]:
    """Read the job records of a claim.lua reply (7 fields each, after the 3-field head)."""
    count = int(reply[2])
    claims = []
    for i in range(count):
        base = 3 + 7 * i
        job, lane, attempts, payload, deadline, tries, max_attempts = reply[base : base + 7]
        claims.append(
            Claim(
                job=job.decode(),
                lane=lane.decode(),
                token=int(attempts),
                payload=bytes(payload),
                deadline_ms=int(deadline),
                tries=int(tries),
                max_attempts=int(max_attempts),
            )
        )
    return claims
