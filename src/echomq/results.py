"""Waiting for a job's result, without polling.

``await bus.result(job, timeout=...)`` (and :meth:`echomq.SyncBus.result`) returns the result a handler
completed the job with, or raises :class:`~echomq.errors.JobDead` with the error of a job that was
dead-lettered (failed for good, cancelled, revoked), :class:`~echomq.errors.ResultTimeout` when it did not
finish in time, :class:`~echomq.errors.ResultExpired` when it finished so long ago that its row is trimmed
(the result is kept ``Settings.result_ttl_ms``, one hour by default; a dead job's error
``dead_ttl_ms``), :class:`~echomq.errors.UnknownJob` when the id was never admitted.

How it waits: one script (``lua/await.lua``) reads the row and, when the job has not finished, counts the
caller among its waiters on the row, in one step; whatever ends the job (complete, the fail or sweep
that dead-letters it, cancel, revoke) then pushes a token per waiter to the job's signal list, and the
caller blocks on that list (``BLPOP``). So a finish between the check and the block is never missed, and
no command is sent while the job runs but the block itself, renewed every few seconds when the client
has a socket timeout shorter than the wait. A token only says "look again": the caller reads the row
once more, so a token left by a caller that gave up, or a dead job retried since, is harmless.

Lost replies: a look that counted the caller twice costs one extra token (it expires with the list, a
minute after the end). Cost: each waiting caller holds one connection of its client's pool while it
blocks; size the pool for the callers that wait at once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from echomq.errors import (
    InvalidOption,
    JobDead,
    ResultExpired,
    ResultTimeout,
    ScriptError,
    UnknownJob,
    translate_redis_errors,
)

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.keyspace import Keyspace

MAX_WAIT_S = 24 * 3600.0
BLOCK_S = 30.0  # the longest single block (a block is renewed until the timeout)
_SOCKET_MARGIN_S = 1.0


def check_timeout(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout <= MAX_WAIT_S:
        raise InvalidOption(f"timeout is a number of seconds from 0 to {MAX_WAIT_S:g}, got {timeout!r}")
    return float(timeout)


def await_call(keys: Keyspace, job: str, *, register: bool) -> tuple[list[str], list[Any]]:
    return [keys.job(job)], ["1" if register else "0"]


def ended(reply: Any, job: str) -> bytes | None:
    """The result an await.lua reply gives, None when the job has not finished; raises for the rest."""
    try:
        code, state, value = int(reply[0]), bytes(reply[1]).decode(), bytes(reply[2])
    except (TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"await.lua answered {reply!r}") from exc
    if code == 1:
        if state == "dead":
            raise JobDead(job, value.decode(errors="replace"))
        return value
    if code == 2:
        raise ResultExpired(f"job {job} is {state}, but its row was trimmed: its result is gone")
    if code == -1:
        raise UnknownJob(f"no job {job}: never admitted, or its tombstone expired")
    return None


def block_for(client: Any, remaining: float) -> float:
    """How long one block may last on ``client``: within its socket timeout, if it has one."""
    limit = BLOCK_S
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if kwargs is None:  # a cluster client
        kwargs = getattr(getattr(client, "nodes_manager", None), "connection_kwargs", {})
    socket_timeout = kwargs.get("socket_timeout")
    if socket_timeout:
        limit = min(limit, max(0.1, float(socket_timeout) - _SOCKET_MARGIN_S))
    return max(0.01, min(remaining, limit))


async def result(bus: BusCore, job: str, *, timeout: float) -> bytes:  # noqa: ASYNC109 (bus.result's)
    """The result of ``job`` once it finishes, waiting up to ``timeout`` seconds (see the module doc)."""
    timeout = check_timeout(timeout)
    deadline = time.monotonic() + timeout
    signal = bus.keys.signal(job)
    register = timeout > 0
    while True:
        keys, args = await_call(bus.keys, job, register=register)
        with translate_redis_errors():
            value = ended(await bus.scripts.run("await", keys, args), job)
        if value is not None:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ResultTimeout(f"job {job} did not finish within {timeout:g} s")
        with translate_redis_errors():
            popped = await bus.redis.blpop([signal], timeout=block_for(bus.redis, remaining))
        register = popped is not None  # a token: look, and count again if it has not ended after all


def result_blocking(bus: Any, job: str, *, timeout: float) -> bytes:
    """:func:`result` on a :class:`~echomq.SyncBus` (its blocking client)."""
    timeout = check_timeout(timeout)
    deadline = time.monotonic() + timeout
    signal = bus.keys.signal(job)
    register = timeout > 0
    while True:
        keys, args = await_call(bus.keys, job, register=register)
        with translate_redis_errors():
            value = ended(bus.scripts.run("await", keys, args), job)
        if value is not None:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ResultTimeout(f"job {job} did not finish within {timeout:g} s")
        with translate_redis_errors():
            popped = bus.redis.blpop([signal], timeout=block_for(bus.redis, remaining))
        register = popped is not None
