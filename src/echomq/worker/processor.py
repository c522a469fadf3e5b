"""The processor: runs one claimed job through its handler and finishes it with the right fenced call.

* An ``async def`` handler is awaited on the event loop; any other callable runs in a daemon thread of
  a pool sized to the worker's concurrency (:mod:`echomq.worker.threads`).
* The handler's return value decides the finish: ``bytes`` or ``None`` -> :func:`echomq.finish.complete`
  with that result; an :class:`~echomq.effects.Effects` or a :class:`~echomq.effects.Completion` -> the
  effects applied with the completion in one step (:func:`echomq.effects.complete`: none if the claim is
  stale; effects that cannot apply to the data, :class:`~echomq.errors.EffectRefused`, fail the try and
  it is retried; effects EchoMQ refuses to run, :class:`~echomq.errors.InvalidEffect`, dead-letter it);
  a :class:`~echomq.states.Finish` value -> the handler finished the job itself (with its own fenced
  script) and nothing more is sent; anything else is a programming error and the job is dead-lettered
  with a message saying so.
* An exception -> :func:`echomq.finish.fail`, retried with backoff until max attempts, except
  :class:`~echomq.errors.Permanent`, which dead-letters at once. A fail that dead-lettered the job
  awaits the worker's ``on_dead`` hook, if any (its errors are logged). A ``CancelledError`` that the handler
  raises itself (an inner task or future it awaited was cancelled, not this run) is such an exception.
* ``job_timeout_s`` -> the job fails with a timeout error (a try is spent). An async handler is
  cancelled. A thread cannot be killed: it runs on with ``job.revoked`` set, its result is ignored, and
  its slot stays taken until it returns, so no more than ``concurrency`` handler threads ever exist.
  Anything it does to Redis through the fenced calls is refused as stale.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from echomq.effects import Completion, Effects
from echomq.errors import EchoMQError, EffectRefused, InvalidInput, Permanent, RedisUnavailable, UnknownJob
from echomq.finish import backoff_ms
from echomq.states import Failure, Finish
from echomq.worker import faults
from echomq.worker.logs import emit

if TYPE_CHECKING:
    from echomq.partitions import AnyBus
    from echomq.worker.completions import Completions, RoutedCompletions
    from echomq.worker.fetcher import Fetcher
    from echomq.worker.handler import DeadHook, Handler, Job, WorkerCounts
    from echomq.worker.lease_keeper import LeaseKeeper
    from echomq.worker.rotation import PartitionedFetcher
    from echomq.worker.threads import DaemonThreads

log = logging.getLogger("echomq.worker")

# Backoff between tries of a finishing call that could not reach Redis (after redis-py's own, if any).
# The calls are fenced, so a retry is safe, and one whose first try landed but lost its reply is told
# what that try did (DONE, RETRYING, DEAD, RELEASED), never STALE.
_FINISH_RETRY_S = (0.1, 0.5, 2.0)
_ERROR_LIMIT = 2000  # characters of an exception's text stored on the row


class Runner(Protocol):
    """What the processor uses of its worker (:class:`echomq.worker.runner.Worker` is one)."""

    bus: AnyBus
    handler: Handler
    handler_is_async: bool
    job_timeout_s: float | None
    on_dead: DeadHook | None
    counts: WorkerCounts
    threads: DaemonThreads
    keeper: LeaseKeeper
    completions: Completions | RoutedCompletions
    fetcher: Fetcher | PartitionedFetcher
    faults_armed: bool

    def hold_slot(self, thread: asyncio.Future[Any]) -> None: ...


def is_async_handler(handler: Callable[..., Any]) -> bool:
    """True for an ``async def`` (or an object whose ``__call__`` is one, or a partial of one)."""
    call = getattr(handler, "__call__", None)  # noqa: B004  (we need the method, not callability)
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


class TimedOut(Exception):
    """The handler exceeded the worker's ``job_timeout_s``; ``thread`` is a thread handler still running."""

    def __init__(self, after_s: float, thread: asyncio.Future[Any] | None = None) -> None:
        super().__init__(after_s)
        self.after_s = after_s
        self.thread = thread


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # A lone surrogate in a handler's message would be refused by Bus.fail: write it as an escape.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:_ERROR_LIMIT]


async def process(worker: Runner, job: Job) -> None:
    """Run ``job`` and finish it. Cancelled by shutdown (which releases the claim itself) or by a reaped
    lease (an async handler); a cancelled run sends no finish."""
    try:
        value = await _invoke(worker, job)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise  # this run was cancelled: shutdown or a reaped lease, which dealt with the claim
        # The handler's own CancelledError (an inner future or task it awaited was cancelled): an
        # ordinary failure. Re-raising it would end the run without a finish, with the lease still
        # renewed by the keeper: the job would stay active as long as the worker lives.
        await _fail(worker, job, _error_text(exc), retryable=True)
        return
    except TimedOut as exc:
        job.revoked.set()
        worker.counts.timed_out += 1
        emit(log, logging.WARNING, "job.timeout", job=job.id, attempt=job.attempt, after_s=exc.after_s)
        if exc.thread is not None:  # the thread runs on: its slot stays taken until it returns
            worker.hold_slot(exc.thread)
        await _fail(worker, job, f"TimedOut: no result after {exc.after_s} s", retryable=True)
        return
    except Exception as exc:  # noqa: BLE001  (every handler error is recorded on the job)
        await _fail(worker, job, _error_text(exc), retryable=not isinstance(exc, Permanent))
        return
    if isinstance(value, Finish):
        worker.keeper.untrack(job.claim)
        _finished(worker, job, value, by="handler")
    elif value is None or isinstance(value, bytes | bytearray | memoryview):
        if worker.faults_armed:
            faults.at("worker.before_ack")
        await _complete(worker, job, b"" if value is None else bytes(value))
    elif isinstance(value, Effects | Completion):
        if worker.faults_armed:
            faults.at("worker.before_ack")
        if isinstance(value, Effects):
            value = Completion(b"", value)
        await _complete(worker, job, value.result, value.effects)
    else:
        expected = "bytes, None, Effects, Completion or Finish"
        problem = f"handler returned {type(value).__name__}; expected {expected}"
        await _fail(worker, job, problem, retryable=False)


async def _invoke(worker: Runner, job: Job) -> Any:
    handler: Callable[[Job], Any] = worker.handler  # async or sync, told apart by handler_is_async
    timeout = worker.job_timeout_s
    midway = worker.faults_armed and faults.WORKER.armed("worker.mid_handler")
    if worker.handler_is_async:
        if timeout is None and not midway:
            return await handler(job)  # no scope: its TimeoutError is the handler's own, a failure
        scope = asyncio.timeout(timeout)
        try:
            async with scope:
                if midway:
                    return await _midway(handler(job))
                return await handler(job)
        except TimeoutError:
            if timeout is not None and scope.expired():
                raise TimedOut(timeout) from None
            raise  # the handler's own TimeoutError: an ordinary failure
    if midway:
        future = await _midway_thread(worker, handler, job)
    else:
        future = worker.threads.submit(lambda: handler(job))
    if timeout is None:
        return await future
    done, _ = await asyncio.wait({future}, timeout=timeout)
    if not done:
        raise TimedOut(timeout, future)
    return future.result()


async def _midway(call: Awaitable[Any]) -> Any:
    """Run ``call`` to its first suspension, then pass the ``worker.mid_handler`` fault point."""
    task = asyncio.ensure_future(call)
    await asyncio.sleep(0)
    faults.at("worker.mid_handler")
    return await task


async def _midway_thread(worker: Runner, handler: Callable[[Job], Any], job: Job) -> asyncio.Future[Any]:
    """Submit the call to a thread, wait until it has begun, then pass the ``worker.mid_handler`` point."""
    started = threading.Event()

    def call() -> Any:
        started.set()
        return handler(job)

    future = worker.threads.submit(call)
    await asyncio.to_thread(started.wait, 10)
    await asyncio.sleep(0.01)  # into the handler's own code
    faults.at("worker.mid_handler")
    return future


async def with_retries(
    worker: Runner, job: Job, call: Callable[[], Any], first_error: EchoMQError | None = None
) -> Any:
    """Await ``call()``, again after each :class:`RedisUnavailable` (:data:`_FINISH_RETRY_S`); None
    (logged ``job.unfinished``) when Redis stays unreachable or the row is gone. ``first_error`` is the
    error of a first try the caller made itself (the pauses then start from the first)."""
    error = first_error
    pauses = iter((*_FINISH_RETRY_S, None))
    while True:
        if error is None:
            try:
                return await call()
            except (RedisUnavailable, UnknownJob) as exc:
                error = exc
        if isinstance(error, UnknownJob):
            emit(log, logging.ERROR, "job.unfinished", job=job.id, attempt=job.attempt, error="row gone")
            return None
        pause = next(pauses)
        if pause is None:
            emit(log, logging.ERROR, "job.unfinished", job=job.id, attempt=job.attempt, error=str(error))
            return None
        await asyncio.sleep(pause)
        error = None


async def _complete(worker: Runner, job: Job, result: bytes, effects: Effects | None = None) -> None:
    worker.keeper.untrack(job.claim)

    def call() -> Awaitable[Finish]:
        return worker.completions.complete(job.claim, result, effects)

    try:
        try:  # the first try inline (most land): with_retries only after it failed
            outcome: Finish | None = await call()
        except (RedisUnavailable, UnknownJob) as exc:
            outcome = await with_retries(worker, job, call, exc)
    except InvalidInput as exc:  # e.g. a result over the payload limit: it can never be stored
        await _fail(worker, job, _error_text(exc), retryable=False)
        return
    except EffectRefused as exc:  # nothing changed; the data may be right by the next try
        await _fail(worker, job, _error_text(exc), retryable=True)
        return
    if outcome is not None:
        _finished(worker, job, outcome, by="worker")


def _finished(worker: Runner, job: Job, outcome: Finish, *, by: str) -> None:
    if outcome is Finish.DONE:
        worker.counts.completed += 1
        if log.isEnabledFor(logging.DEBUG):
            emit(log, logging.DEBUG, "job.completed", job=job.id, lane=job.lane, attempt=job.attempt, by=by)
    else:
        worker.counts.stale += 1
        emit(log, logging.WARNING, "job.stale", job=job.id, attempt=job.attempt, call="complete")


async def _fail(worker: Runner, job: Job, error: str, *, retryable: bool) -> None:
    """Fail the try; a retry goes to ``delayed`` for the backoff, and the fetcher wakes for it then.

    A lost reply, retried (with the same delay), is answered what the first call did (RETRYING or
    DEAD, see :func:`echomq.finish.fail`), so the fetcher still learns when the retry is due."""
    worker.keeper.untrack(job.claim)
    delay_ms = backoff_ms(worker.bus.route(job.lane), job.tries or job.attempt)
    outcome = await with_retries(
        worker, job, lambda: worker.bus.fail(job.claim, error, retryable=retryable, delay_ms=delay_ms)
    )
    if outcome is None:
        return
    if outcome is Failure.RETRYING:
        worker.fetcher.due_in(delay_ms / 1000, job.lane)
    if outcome is Failure.STALE:
        worker.counts.stale += 1
        emit(log, logging.WARNING, "job.stale", job=job.id, attempt=job.attempt, call="fail")
        return
    worker.counts.failed += 1
    if outcome is Failure.DEAD:
        worker.counts.dead += 1
    emit(
        log,
        logging.WARNING,
        "job.failed",
        job=job.id,
        lane=job.lane,
        attempt=job.attempt,
        tries=job.tries,
        outcome=outcome.value,
        error=error[:200],
    )
    if outcome is Failure.DEAD and worker.on_dead is not None:
        try:
            await worker.on_dead(job)
        except Exception as exc:  # noqa: BLE001  (a hint that failed; the application's scan catches up)
            emit(log, logging.ERROR, "job.dead_hook_failed", job=job.id, error=_error_text(exc))
