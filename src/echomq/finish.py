"""The fenced finish: complete, fail, extend, release (admission and inspection are :mod:`echomq.jobs`).

Guarantees provided here:

* **Retention keeps up with any throughput.** Trimming is amortised with the work: each
  :func:`complete` (and each application script that completes through the ``finish`` include, as
  codemojex's score does) first trims up to two done rows past the result ttl, oldest first; each
  :func:`fail` that dead-letters trims up to two dead rows past the dead ttl; every sweep trims up to its
  limit of each set, whether or not it holds the sweep lock. A finish adds one row and trims up to two,
  so rows past their ttl never pile up, and memory stays flat at any speed: about the rows finished
  within one result ttl (whole) plus those finished within one dedup window (tombstones).
* **Fenced finish.** Every finishing call (:func:`complete`, :func:`fail`, :func:`release`) carries the
  claim's attempts token and request id and is refused (``STALE``) unless the job is active under that
  very token and was claimed by that very claim call (the row names its request). A worker whose lease
  was reaped, even if the job was re-claimed by another worker, cannot finish it; nor can a claim of a
  job's earlier life: an id finished, trimmed, forgotten after the dedup window and admitted anew
  restarts its tokens, so its new claim holds the token the old one held, but not its request id.
  :func:`extend` answers ``Lease.REVOKED`` in the same cases, so a worker can stop before side effects.
  A :class:`~echomq.jobs.Claim` built with ``request=""`` is fenced by its token alone: it finishes the
  job active under that token, in whichever life.
* **Lost replies.** Any call can run in Redis and its reply never arrive (a timeout, a cut connection,
  a Redis pause longer than the socket timeout); redis-py may retry the command (a client made as
  ``Redis(host=...)`` does, 10 times; one made by ``from_url`` does not) and the worker retries its
  finishing calls.
  Every call here is safe to retry and its retry answers truthfully, as each function's docstring says:
  a retried finish of this very claim is told what that claim's first call did (``DONE``, ``RETRYING``,
  ``DEAD``, ``RELEASED``), never ``STALE``: a completion is read from the row (done under the token
  and request; a trimmed row's tombstone, which drops the request, by the token), a fail or release
  from the row's ``ended`` words (the last 4 fail/release endings, by token and request).
* **When a handler runs twice.** Delivery is at least once: a handler whose worker dies, stalls past its
  lease, or loses its connection after the effect and before :func:`complete` is run again by the next
  claimant. Make the effect idempotent on the job id (as codemojex does), or do the effect and the
  completion in one script.
"""

from __future__ import annotations

import random
from typing import Any

from echomq._validate import check_int, check_utf8
from echomq.core import BusCore, finish_args
from echomq.errors import InvalidOption, InvalidPayload, translate_redis_errors
from echomq.jobs import MAX_DELAY_MS, MAX_LEASE_MS, Claim, check_bytes, check_claim, reply_code
from echomq.states import Failure, Finish, Lease, Release


def complete_call(bus: BusCore, claim: Claim, result: bytes) -> tuple[list[str], list[Any]]:
    """Keys and args of one complete.lua call (shared with the worker's batched completions): the
    claim, the result, and :func:`echomq.core.finish_args` (the bus prefix, result ttl and dedup
    window that the trim of expired done rows needs)."""
    check_claim(claim)
    data = check_bytes("result", result, bus.settings.max_payload)
    keys = bus.keys
    return (
        [keys.job(claim.job), keys.active, keys.done, keys.stats],
        [claim.job, claim.token, claim.request, data, *finish_args(bus)],
    )


def finish_outcome(claim: Claim, reply: Any) -> Finish:
    """Read a complete.lua reply (4: already completed by this very claim, a retry after a lost reply)."""
    code = reply_code("complete", reply, claim.job)
    return Finish.DONE if code in (1, 4) else Finish.STALE


async def complete(bus: BusCore, claim: Claim, result: bytes = b"") -> Finish:
    """Finish ``claim``: ``Finish.DONE``, or ``Finish.STALE`` if the lease is no longer this claim's
    (another token, or another claim call's request id: see the module doc).

    A DONE complete first trims up to two done rows past the result ttl (see the module doc); a STALE
    one changes nothing but the ``stale`` counter. Lost reply: the job is done and those rows trimmed;
    the retry finds the job done under this claim's token and answers ``DONE``, changing nothing and
    trimming nothing (even after the row was trimmed to its tombstone), so no row is trimmed or counted
    twice."""
    keys, args = complete_call(bus, claim, result)
    with translate_redis_errors():
        reply = await bus.scripts.run("complete", keys, args)
    return finish_outcome(claim, reply)


def backoff_ms(bus: BusCore, tries: int) -> int:
    """Exponential backoff with equal jitter: half the step is fixed, half is random."""
    settings = bus.settings
    step = min(settings.backoff_cap_ms, settings.backoff_base_ms * (2 ** max(0, min(tries, 40) - 1)))
    half: int = step // 2
    return half + random.randint(0, step - half)


async def fail(
    bus: BusCore,
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
    check_utf8("error", error, InvalidPayload)
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
                claim.request,
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
    code = reply_code("fail", reply, claim.job)
    return {1: Failure.RETRYING, 2: Failure.DEAD, 3: Failure.RETRYING, 4: Failure.DEAD}.get(
        code, Failure.STALE
    )


def extend_call(bus: BusCore, claim: Claim, lease_ms: int) -> tuple[list[str], list[Any]]:
    """Keys and args of one extend.lua call (shared with the lease keeper's blocking client)."""
    check_claim(claim)
    lease = check_int("lease_ms", lease_ms, 1, MAX_LEASE_MS)
    keys = bus.keys
    return [keys.job(claim.job), keys.active, keys.stats], [claim.job, claim.token, claim.request, lease]


def lease_outcome(claim: Claim, reply: Any) -> Lease:
    """Read an extend.lua reply."""
    code = reply_code("extend", reply, claim.job)
    return {1: Lease.EXTENDED, 2: Lease.FINISHED}.get(code, Lease.REVOKED)


async def extend(bus: BusCore, claim: Claim, lease_ms: int) -> Lease:
    """Renew the lease to server now + ``lease_ms``; ``Lease.REVOKED`` if it was reaped,
    ``Lease.FINISHED`` if this very claim already completed the job.

    Lost reply: the lease was renewed; the retry renews it again from the server's now (``EXTENDED``)."""
    keys, args = extend_call(bus, claim, lease_ms)
    with translate_redis_errors():
        reply = await bus.scripts.run("extend", keys, args)
    return lease_outcome(claim, reply)


async def release(bus: BusCore, claim: Claim) -> Release:
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
            [claim.job, claim.token, claim.request, claim.lane, bus.settings.wake_cap],
        )
    code = reply_code("release", reply, claim.job)
    return Release.RELEASED if code in (1, 3) else Release.STALE
