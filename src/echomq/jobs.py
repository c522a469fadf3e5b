"""Admission: enqueue, enqueue_many; the :class:`Claim` a worker holds, and the reply codes every script
shares. The finishing calls (complete, fail, extend, release) are :mod:`echomq.finish`; inspection is
:mod:`echomq.inspection`; the row's stored fields are :mod:`echomq.rows`.

Guarantees provided here:

* **Idempotent admission.** :func:`enqueue` is one script keyed by the branded JOB id. A second enqueue
  of the same id with the same lane and payload is ``Admission.DUPLICATE`` and changes nothing; the same
  id with another lane or payload is ``Admission.CONFLICT`` and changes nothing (it is never silently
  dropped or overwritten). Duplicates are absorbed for the bus's dedup window after the job finished
  (default 24 h): the row is kept whole for ``result_ttl_ms`` (default 1 h), then trimmed to a
  tombstone (state, attempts, 8 bytes of digest of the lane and payload: a field of a hash shared by the
  ids minted in the same ~65 s, :meth:`~echomq.keyspace.Keyspace.tombstone`) that counts until the
  window's end.
  After that the same id would be admitted anew. Dead rows are kept whole for ``dead_ttl_ms`` (180
  days) for inspection and :func:`echomq.dead.retry_dead`, then trimmed the same way (see
  :mod:`echomq.finish`: "Retention").
* **Lost replies.** An admission can run in Redis and its reply never arrive; its retry answers
  truthfully (``DUPLICATE``), as :func:`enqueue` says; see :mod:`echomq.finish` for the finishing calls.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from echomq import ids
from echomq._validate import check_int
from echomq.errors import (
    InvalidLane,
    InvalidPayload,
    InvalidToken,
    PayloadTooLarge,
    ScriptError,
    UnknownJob,
    translate_redis_errors,
    translated,
)
from echomq.keyspace import JOB_BRAND, check_lane, check_request
from echomq.states import Admission

if TYPE_CHECKING:
    from echomq.core import BusCore, Settings
    from echomq.keyspace import Keyspace

MAX_ATTEMPTS_LIMIT = 1000
PRIORITY_LIMIT = 1_000_000
MAX_DELAY_MS = 365 * 24 * 3600 * 1000
MAX_LEASE_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Claim:
    """A job held by a worker under ``token`` until ``deadline_ms`` (server clock), claimed by the claim
    call ``request`` (every job of one call shares its request id).

    Only ``job``, ``lane``, ``token`` and ``request`` matter to the finishing calls: they are refused as
    stale unless the job is active under that token and claimed by that request, so a claim of a job's
    earlier life (its id finished, forgotten and admitted anew, its token restarting) never finishes its
    new life. A process that learned only the job, lane and token elsewhere can build a Claim with
    ``request=""`` to finish under the token alone (refused as stale if the lease moved on).
    """

    job: str
    lane: str
    token: int
    payload: bytes = b""
    deadline_ms: int = 0
    tries: int = 0
    max_attempts: int = 0
    request: str = ""


@dataclass(frozen=True, slots=True)
class NewJob:
    """One job for :func:`enqueue_many`."""

    job: str
    lane: str
    payload: bytes
    max_attempts: int = 5
    priority: int = 0
    delay_ms: int = 0


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
    check_request(claim.request)
    return claim


def check_bytes(name: str, value: object, limit: int) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidPayload(f"{name} is bytes, got {type(value).__name__}")
    data = bytes(value)
    if len(data) > limit:
        raise PayloadTooLarge(f"{name} is {len(data)} bytes, over the limit of {limit}")
    return data


class Admitting(Protocol):
    """What admission and inspection need of a bus, the asyncio :class:`~echomq.Bus` or the blocking
    :class:`~echomq.SyncBus`: its keyspace and settings."""

    @property
    def keys(self) -> Keyspace: ...

    @property
    def settings(self) -> Settings: ...


def enqueue_call(bus: Admitting, spec: NewJob) -> tuple[list[str], list[Any]]:
    """Keys and args of one enqueue.lua call, every input checked (shared by both buses and the
    benchmark): a hostile or careless producer gets a typed error here and nothing is sent.

    The id must be minted within ``Settings.id_span_ms`` (the dedup window or 6 h, the longer) of this
    process's clock, either way: the tombstones of the ids minted in the same ~65 s share one hash,
    which lives until its latest tombstone expires (``lua/includes/row.lua``), so ids with one made-up
    old or future timestamp, taken from a client, would keep one hash growing as long as they came."""
    keys = bus.keys
    job_key = keys.job(spec.job)
    ids.check_recent(spec.job, bus.settings.id_span_ms)
    lane_key = keys.lane(spec.lane)
    payload = check_bytes("payload", spec.payload, bus.settings.max_payload)
    max_attempts = check_int("max_attempts", spec.max_attempts, 1, MAX_ATTEMPTS_LIMIT)
    priority = check_int("priority", spec.priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
    delay_ms = check_int("delay_ms", spec.delay_ms, 0, MAX_DELAY_MS)
    return (
        [job_key, lane_key, keys.ring, keys.delayed, keys.wake, keys.stats, keys.waiting],
        [spec.job, spec.lane, payload, max_attempts, priority, delay_ms, bus.settings.wake_cap],
    )


_ADMISSION = {1: Admission.ADMITTED, 0: Admission.DUPLICATE, -1: Admission.CONFLICT}


def admission(reply: Any) -> Admission:
    """The admission an enqueue.lua reply reports."""
    try:
        return _ADMISSION[int(reply[0])]
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"enqueue.lua answered {reply!r}") from exc


async def enqueue(
    bus: BusCore,
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
    if bus.durable is not None:
        return admissions(await bus.durable.run("enqueue", [(keys, args)]))[0]
    with translate_redis_errors():
        return admission(await bus.scripts.run("enqueue", keys, args))


async def run_each(
    bus: BusCore, name: str, calls: list[tuple[list[str], list[Any]]], *, return_exceptions: bool = False
) -> list[Any]:
    """Run script ``name`` once per ``(keys, args)``, concurrently, one call each: a batch on a cluster,
    where redis-py's pipeline refuses scripts. With ``return_exceptions`` a failed call's exception is its
    reply; else the first one raises (untranslated).

    At most :data:`CLUSTER_CALLS` calls are in flight at once, and never more than half the client's pool
    (``max_connections``, per node): a call past a full pool fails at once (MaxConnectionsError), so a
    batch larger than the pool would otherwise be refused, and the other half stays free for the rest
    of the process (a worker's claims and finishes)."""
    # A cold cluster client that discovers the cluster under many concurrent first calls can hand a
    # half-made connection to one of them (redis-py 8.1); discovering first, once, avoids it.
    await bus.redis.initialize()
    gate = _gates.get(bus.redis)
    if gate is None:  # one per client: the partitions of a PartitionedBus share their client's pool
        gate = _gates[bus.redis] = asyncio.Semaphore(max(1, min(CLUSTER_CALLS, pool_size(bus.redis) // 2)))

    async def one(keys: list[str], args: list[Any]) -> Any:
        async with gate:
            return await bus.scripts.run(name, keys, args)

    runs = (one(keys, args) for keys, args in calls)
    return await asyncio.gather(*runs, return_exceptions=return_exceptions)


CLUSTER_CALLS = 32


def pool_size(client: Any) -> int:
    """How many connections ``client``'s pool may open (per node on a cluster)."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        return int(getattr(pool, "max_connections", 2 * CLUSTER_CALLS))
    options = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    return int(options.get("max_connections", 2 * CLUSTER_CALLS))


_gates: weakref.WeakKeyDictionary[Any, asyncio.Semaphore] = weakref.WeakKeyDictionary()


async def enqueue_many(bus: BusCore, jobs: Iterable[NewJob]) -> list[Admission]:
    """Admit many jobs in one round trip; each is its own idempotent script (not one transaction).

    Every job is validated before anything is sent, so bad input changes nothing. On a cluster the
    scripts go concurrently, one call each (redis-py's cluster pipeline refuses scripts).
    Lost reply: some or all were admitted; the retry answers ``DUPLICATE`` for those and admits the rest.
    """
    calls = [enqueue_call(bus, spec) for spec in jobs]
    if not calls:
        return []
    if bus.durable is not None:
        return admissions(await bus.durable.run("enqueue", calls))
    with translate_redis_errors():
        if bus.is_cluster:
            replies = await run_each(bus, "enqueue", calls)
        else:
            replies = await bus.scripts.run_many("enqueue", calls)
    return admissions(replies)


def admissions(replies: list[Any]) -> list[Admission]:
    """The admissions of a batch's enqueue.lua replies; the first error reply raises (translated), as
    the batch's failure: the jobs before and after it may have been admitted, and its retry says which."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise translated(reply) from reply
    return [admission(reply) for reply in replies]


def reply_code(name: str, reply: Any, job: str) -> int:
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


def claims_from_reply(reply: Sequence[Any], request: str) -> list[Claim]:
    """Read the job records of a claim.lua reply (7 fields each, after the 3-field head): the jobs
    claimed by the claim call ``request``."""
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
                request=request,
            )
        )
    return claims
