"""Control of single jobs: cancel a queued or delayed job, revoke an active one.

Guarantees provided here:

* **Cancel** (:func:`cancel`) takes a queued or delayed job out of the queue before any worker claims it,
  in one script (``lua/cancel.lua``): it is dead-lettered with the error ``cancelled: <reason>``, so it
  can be inspected, retried (:func:`echomq.dead.retry_dead`) or deleted like any dead letter, and its
  id keeps absorbing duplicate admissions for the dedup window. A job already claimed is not touched:
  cancel answers :attr:`~echomq.states.Control.REFUSED` and the caller may revoke it. Cancel against
  claim is one script against another: the job is either cancelled (no worker ever runs it) or claimed
  (cancel refuses), never both.
* **Revoke** (:func:`revoke`) takes an active job from its worker (``lua/revoke.lua``): it leaves active
  and is dead-lettered with ``revoked: <reason>``. Its worker's claim is no longer active, so every
  finishing call of that claim is refused as stale (the fence of :mod:`echomq.finish`): its complete does
  not count and its effects done in the finish script (the score, an application's) are not applied; the
  worker's lease keeper, refused at its next renewal, sets the handler's ``job.revoked``. Revoke against
  complete: whichever runs first wins, the other is refused.
* **Waiters** for the job's result (:mod:`echomq.results`) wake with :class:`~echomq.errors.JobDead`.
* **Lost replies.** Each call carries a request id that the row keeps (``z``); its retry (redis-py's, or
  the caller's with the same ``request``) finds it and answers ``DONE`` again, nothing changing twice,
  even after the job was retried from the dead set. Another call on a dead job is ``REFUSED``.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from echomq.errors import InvalidOption, RedisUnavailable, translate_redis_errors
from echomq.jobs import reply_code
from echomq.keyspace import check_request
from echomq.states import Control

if TYPE_CHECKING:
    from echomq.core import BusCore, Settings
    from echomq.keyspace import Keyspace

MAX_REASON = 200  # characters of a reason kept in the row's error


def _reason(reason: object) -> str:
    if not isinstance(reason, str):
        raise InvalidOption(f"a reason is text, got {type(reason).__name__}")
    text = reason[:MAX_REASON]
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidOption("a reason is text UTF-8 can encode") from exc
    return text


def new_request() -> str:
    """A request id for one cancel or revoke call (its retries send the same)."""
    return secrets.token_hex(12)


def end_call(
    name: str, keys: Keyspace, settings: Settings, job: str, reason: str, *, request: str | None = None
) -> tuple[list[str], list[Any]]:
    """Keys and args of one ``cancel.lua`` or ``revoke.lua`` call (``name``), every input checked: the two
    take the same arguments, and the set the job leaves (delayed besides its lane, or active)."""
    leaves = {"cancel": keys.delayed, "revoke": keys.active}[name]
    return (
        [keys.job(job), leaves, keys.dead, keys.ring, keys.waiting, keys.stats],
        [
            job,
            keys.prefix,
            _reason(reason),
            settings.dead_ttl_ms,
            settings.dedup_window_ms,
            _request(request),
        ],
    )


def _request(request: str | None) -> str:
    if request is None:
        return new_request()
    if not check_request(request):
        raise InvalidOption("a cancel or revoke request id is 1-64 of [A-Za-z0-9_.:-]")
    return request


def outcome(name: str, reply: Any, job: str) -> Control:
    """What a cancel.lua or revoke.lua reply reports (no row: :class:`~echomq.errors.UnknownJob`)."""
    code = reply_code(name, reply, job)
    if code == -3:
        raise RedisUnavailable(f"the bus's slot is being resharded: job {job} was not cancelled, try again")
    return Control.DONE if code in (1, 2) else Control.REFUSED


async def _end(bus: BusCore, name: str, job: str, reason: str, request: str | None) -> Control:
    keys, args = end_call(name, bus.keys, bus.settings, job, reason, request=request)
    with translate_redis_errors():
        return outcome(name, await bus.scripts.run(name, keys, args), job)


async def cancel(bus: BusCore, job: str, reason: str = "", *, request: str | None = None) -> Control:
    """Cancel a queued or delayed job: ``DONE``, or ``REFUSED`` when it is active or finished. ``request``
    names the call (a fresh id when None): sent again with the same one, it is answered as a retry."""
    return await _end(bus, "cancel", job, reason, request)


async def revoke(bus: BusCore, job: str, reason: str = "", *, request: str | None = None) -> Control:
    """Revoke an active job: ``DONE``, or ``REFUSED`` when it is not active (``request`` as for cancel)."""
    return await _end(bus, "revoke", job, reason, request)
