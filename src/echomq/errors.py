"""The one error tree of EchoMQ.

Every exception EchoMQ raises derives from :class:`EchoMQError`::

    EchoMQError
    ├── InvalidInput (also ValueError)       bad input from a caller; nothing was changed
    │   ├── InvalidId                         ill-formed branded id (brand, length, alphabet, case)
    │   ├── InvalidLane                       ill-formed lane name
    │   ├── InvalidTag                        ill-formed bus tag
    │   ├── InvalidToken                      attempts token that is not a positive int
    │   ├── InvalidPayload                    payload that is not bytes; error text UTF-8 cannot encode
    │   │   └── PayloadTooLarge               payload over the bus's size limit
    │   ├── InvalidOption                     an out-of-range option (lease, count, delay, owner, ...)
    │   │   └── InvalidSchedule               a cron expression or interval that cannot be read or never fires
    │   └── InvalidEffect                     an effect EchoMQ does not run, a bad argument, a key of
    │                                         EchoMQ's or (on a cluster) outside the bus's slot
    ├── UnknownJob (also LookupError)         no row for that job id (never admitted, or trimmed)
    │   └── ResultExpired                     the job finished but its row is trimmed: its result is gone
    ├── JobDead                               the job awaited was dead-lettered (failed, cancelled, revoked)
    ├── ResultTimeout (also TimeoutError)     the job awaited did not finish in time
    ├── EffectRefused                         effects that cannot apply to the data as it is; nothing changed
    ├── ScriptError                           a Lua script answered something outside its contract
    ├── RedisUnavailable (also ConnectionError) the server could not be reached or timed out
    │   └── NotDurable                        fewer replicas than asked acknowledged an admission in time
    ├── MissingExtra (also ImportError)       an optional extra is not installed (echomq[metrics], ...)
    └── Permanent                             raised by a worker handler: dead-letter the job now, no retry

A str that UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``) is refused the same way, with
the error of its argument, before anything is sent.

Expected outcomes are *not* errors: a duplicate admission, a conflict, a stale finish and a revoked
lease are values of the enums in :mod:`echomq.states` that callers match on.

Redis client errors are translated here, at the boundary, by :func:`translate_redis_errors`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions


class EchoMQError(Exception):
    """Root of every error EchoMQ raises."""


class InvalidInput(EchoMQError, ValueError):
    """The caller passed something ill-formed. Nothing was changed."""


class InvalidId(InvalidInput):
    """A branded id is ill-formed: wrong brand, length, alphabet or case."""


class InvalidLane(InvalidInput):
    """A lane name is empty, too long, or holds characters outside ``[A-Za-z0-9_.:-]``."""


class InvalidTag(InvalidInput):
    """A bus tag is empty, too long, or holds characters outside ``[A-Za-z0-9_.-]``."""


class InvalidToken(InvalidInput):
    """An attempts token is not a positive integer."""


class InvalidPayload(InvalidInput):
    """A payload or result is not ``bytes``, or a failure's error text is not text UTF-8 can encode."""


class PayloadTooLarge(InvalidPayload):
    """A payload is larger than the bus's ``max_payload`` limit."""


class InvalidOption(InvalidInput):
    """An option is out of its documented range."""


class InvalidSchedule(InvalidOption):
    """A cron expression or interval (:mod:`echomq.cron`) is ill-formed, out of range, or never fires."""


class InvalidEffect(InvalidInput):
    """An effect (:class:`echomq.Effects`) that EchoMQ does not run: a bad argument, a key under
    ``emq:`` (EchoMQ's own), or, on a cluster, a key outside the bus's slot. Nothing was sent."""


class EffectRefused(EchoMQError):
    """Effects that cannot apply to the data as it is (a key of another type, a counter that is not an
    integer or would leave +-(2**53 - 1), a stream out of ids), found before any ran: nothing changed, and
    the job is still active under the claim (the reason is the message)."""


class UnknownJob(EchoMQError, LookupError):
    """No row exists for that job id: it was never admitted, or its tombstone expired."""


class ResultExpired(UnknownJob):
    """The job finished, but its row was trimmed to a tombstone past the result ttl: its result is gone."""


class JobDead(EchoMQError):
    """The job awaited was dead-lettered: it failed for good, or was cancelled or revoked. ``error`` is
    the row's error text (``cancelled: ...``, ``revoked: ...`` or the handler's last failure)."""

    def __init__(self, job: str, error: str) -> None:
        super().__init__(f"job {job} is dead: {error}")
        self.job = job
        self.error = error


class ResultTimeout(EchoMQError, TimeoutError):
    """The job awaited did not finish within the timeout (it may still finish later)."""


class ScriptError(EchoMQError):
    """A Lua script answered outside its documented contract (a bug, or a foreign key in the bus)."""


class RedisUnavailable(EchoMQError, ConnectionError):
    """Redis could not be reached, or the call timed out. The call's effect is unknown.

    On a cluster also: the bus's slot is being resharded and the call was refused (TRYAGAIN) until the
    client's redirections ran out; then nothing was done. Either way, calling again later is the remedy."""


class NotDurable(RedisUnavailable):
    """A durable admission ran on the master but fewer replicas than asked acknowledged it in time
    (``Settings.wait_replicas``, :mod:`echomq.durable`). Retry it: an admission is idempotent."""


class MissingExtra(EchoMQError, ImportError):
    """A feature's optional dependencies are not installed; the message names the extra to install
    (``pip install 'echomq[metrics]'``, ``'echomq[dashboard]'``)."""


def require_extra(extra: str, module: str) -> None:
    """Raise :class:`MissingExtra` unless ``module`` can be imported (it belongs to ``extra``)."""
    try:
        __import__(module)
    except ImportError as exc:
        raise MissingExtra(
            f"this needs {module!r}, which echomq installs only with its {extra!r} extra: "
            f"pip install 'echomq[{extra}]'"
        ) from exc


class Permanent(EchoMQError):
    """Raised by a worker handler: the job can never succeed, so it is dead-lettered without a retry.

    Any other exception from a handler is retried with backoff until the job's max attempts.
    """


# Errors that mean the server (on a cluster: the node owning the slot) could not be reached in time.
_UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.RedisClusterException,  # a cluster client that cannot reach a node, or a slot's owner
    # A slot being resharded refused the call (TRYAGAIN: its keys are split between two nodes) until the
    # client's redirections ran out ("TTL exhausted"): nothing was done, and a later call may run.
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterError,
)


# redis-py's asyncio connection, closed under a call by a concurrent disconnect (its cluster client
# resets a node's connections when the slot map changes), fails with AttributeError ('NoneType' object has
# no attribute 'writelines' / 'read'): the connection is gone, as with a ConnectionError.
_CONNECTION_MODULES = ("redis/asyncio/connection.py", "redis\\asyncio\\connection.py")


def closed_under_call(exc: BaseException) -> bool:
    """True for redis-py's AttributeError from a connection closed under the call (see above)."""
    if not isinstance(exc, AttributeError):
        return False
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename.endswith(_CONNECTION_MODULES)


def script_not_loadable(exc: BaseException) -> bool:
    """True for the refusal of ``SCRIPT LOAD`` to a user without the right: redis-py's fallback after
    NOSCRIPT (a server whose script cache is empty, e.g. restarted) for a least-privilege client. Nothing
    ran; the call can succeed once a process that may has loaded the scripts, as after an outage."""
    if not isinstance(exc, redis.exceptions.NoPermissionError):
        return False
    text = str(exc).lower()
    return "'script" in text or "script|load" in text


def translated(exc: BaseException) -> EchoMQError:
    """The EchoMQ error for a failed Redis call: :class:`RedisUnavailable` if the server could not be
    reached (or its script cache lacks a script this user may not load, :func:`script_not_loadable`),
    else :class:`ScriptError` (a refusal: an error reply, OOM, READONLY, BUSY...)."""
    if isinstance(exc, EchoMQError):
        return exc
    if isinstance(exc, _UNREACHABLE) or closed_under_call(exc) or script_not_loadable(exc):
        return RedisUnavailable(str(exc) or type(exc).__name__)
    return ScriptError(str(exc))


@contextmanager
def translate_redis_errors() -> Iterator[None]:
    """Translate redis-py errors raised inside the block into the EchoMQ tree."""
    try:
        yield
    except (*_UNREACHABLE, redis.exceptions.ResponseError) as exc:
        raise translated(exc) from exc
    except AttributeError as exc:
        if not closed_under_call(exc):
            raise
        raise translated(exc) from exc
