"""The worker: claims jobs for its free slots, runs a handler on each, and finishes them, fenced.

This module is the worker's life (slots, start, graceful shutdown, signals); its runtime shape, its
guarantees and its idle command budget are the doc of :mod:`echomq.worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from dataclasses import asdict
from typing import Any

from echomq._validate import check_int
from echomq.errors import EchoMQError, InvalidOption, RedisUnavailable, ScriptError
from echomq.jobs import MAX_LEASE_MS, Claim
from echomq.lanes import MAX_BATCH
from echomq.partitions import AnyBus, PartitionedBus
from echomq.states import Release
from echomq.worker import faults, processor
from echomq.worker.completions import completions_for
from echomq.worker.eviction import check_eviction_policy
from echomq.worker.fetcher import Fetcher, first_of
from echomq.worker.handler import DeadHook, Handler, Job, WorkerCounts
from echomq.worker.lease_keeper import LeaseKeeper
from echomq.worker.logs import emit
from echomq.worker.rotation import PartitionedFetcher
from echomq.worker.threads import DaemonThreads

__all__ = ["IDLE_COMMANDS_PER_MIN", "SWEEP_PERIOD_S", "Worker"]

log = logging.getLogger("echomq.worker")

# The shortest time between two of a worker's sweeps for leases and trims (see echomq.worker.fetcher): a
# killed worker's job is claimable again at most lease + this period after its last renewal.
SWEEP_PERIOD_S = 10.0
# The documented ceiling of Redis commands a minute from one idle worker, counting those its scripts run
# (the default settings send 17 per 10 min, see echomq.worker.fetcher).
IDLE_COMMANDS_PER_MIN = 2

# Claim sizing: a worker claims for its free slots when at least this fraction of them is free, or when
# no complete is on its way to Redis (the slots still taken are the handlers', however long they run).
# Otherwise it waits for those completes, which free their slots within a round trip: a worker that
# claimed each slot as it freed would fall, once its jobs' phases drift apart, into claims (and
# pipelines of completes) of a job or two, a round trip each; waiting gathers them into one. A claim
# whose answer never came is asked again at once, whatever is free (its jobs' leases run meanwhile).
CLAIM_FRACTION = 0.5
_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)  # pauses of the loop after Redis errors, the last one repeated
_FINISH_WAIT_S = 3.0  # at shutdown, a finish already on the wire (or a lost claim's retry) gets this long


def _check_seconds(name: str, value: object, *, low: float, high: float = 24 * 3600.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidOption(f"{name} is a number of seconds from {low} to {high}, got {value!r}")
    return float(value)


class Worker:
    """Runs ``handler`` on the jobs of ``bus``, ``concurrency`` at a time; see the module doc."""

    def __init__(
        self,
        bus: AnyBus,
        handler: Handler,
        *,
        concurrency: int = 10,
        lease_ms: int = 30_000,
        job_timeout_s: float | None = None,
        sweep_every_s: float = SWEEP_PERIOD_S,
        grace_s: float = 10.0,
        owner: str | None = None,
        on_dead: DeadHook | None = None,
    ) -> None:
        """``on_dead`` is awaited with the job each time this worker's fail dead-letters one (after the
        fail landed; its errors are logged, never raised). It is a prompt hint, not a guarantee: it does
        not run for jobs the sweep dead-letters (lease expired on the last try), nor if the worker dies
        between the fail and the hook; scan the dead set for those."""
        if not callable(handler):
            raise InvalidOption(f"handler is a callable, got {type(handler).__name__}")
        self.bus = bus
        self.handler = handler
        self.handler_is_async = processor.is_async_handler(handler)
        self.on_dead = on_dead
        self.concurrency = check_int("concurrency", concurrency, 1, MAX_BATCH)
        self.lease_ms = check_int("lease_ms", lease_ms, 100, MAX_LEASE_MS)
        self.job_timeout_s = (
            None if job_timeout_s is None else _check_seconds("job_timeout_s", job_timeout_s, low=0.001)
        )
        self.sweep_every_s = _check_seconds("sweep_every_s", sweep_every_s, low=0.05, high=3600.0)
        self.grace_s = _check_seconds("grace_s", grace_s, low=0.0)
        self.owner = owner if owner is not None else f"{socket.gethostname()}:{os.getpid()}"
        self.counts = WorkerCounts()
        self.keeper = LeaseKeeper(bus, self.lease_ms, on_revoked=self._on_revoked)
        self.threads = DaemonThreads(self.concurrency)
        self.completions = completions_for(bus)
        # Fault points are armed by the environment at start (tests only); unarmed, none is looked up.
        self.faults_armed = bool(os.environ.get(faults.ENV))
        self._tasks: dict[asyncio.Task[None], Job] = {}
        self._held_threads: set[asyncio.Future[Any]] = set()
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._slot_freed = asyncio.Event()
        fetcher = PartitionedFetcher if isinstance(bus, PartitionedBus) else Fetcher
        self.fetcher: Fetcher | PartitionedFetcher = fetcher(
            bus,  # type: ignore[arg-type]  # each class takes its own kind of bus
            lease_ms=self.lease_ms,
            owner=self.owner,
            sweep_every_s=self.sweep_every_s,
            stopping=self._stopping,
        )
        self._signals: list[signal.Signals] = []
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self._policy_unchecked = False  # the maxmemory-policy check could not reach Redis at start
        self._claim_at = max(1, int(self.concurrency * CLAIM_FRACTION))  # free slots worth a claim

    @property
    def processed(self) -> int:
        """Jobs completed by this worker (or finished by its handler) since start."""
        return self.counts.completed

    @property
    def failed(self) -> int:
        """Failed tries recorded by this worker since start (retrying or dead)."""
        return self.counts.failed

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def stop(self, *, now: bool = False) -> None:
        """Stop claiming and shut down; with ``now``, release in-flight jobs without the grace period.

        Call it from the worker's event loop (signal handlers installed by the worker do).
        """
        if not self._stopping.is_set():
            emit(log, logging.INFO, "worker.stopping", in_flight=len(self._tasks), grace_s=self.grace_s)
        self._stopping.set()
        if now:
            self._hurry.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM / SIGINT stop the worker gracefully; a second one releases in-flight jobs at once."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
            self._signals.append(sig)

    def _on_signal(self) -> None:
        self.stop(now=self._stopping.is_set())

    def hold_slot(self, thread: asyncio.Future[Any]) -> None:
        """Count a timed-out handler thread against ``concurrency`` until it returns."""
        self._held_threads.add(thread)
        thread.add_done_callback(self._thread_returned)

    async def run(self, *, handle_signals: bool = False) -> None:
        """Claim and process jobs until :meth:`stop` (or a signal, with ``handle_signals``).

        A worker runs once: after :meth:`stop`, make a new one. The bus stays open (it is the caller's).
        """
        if self._running:
            raise InvalidOption("this worker is already running")
        self._running = True
        self._event_loop = asyncio.get_running_loop()
        try:
            if handle_signals:
                self.install_signal_handlers()
            try:  # a partitioned bus opened with another P: refused at once
                await self.bus.check_layout()
            except RedisUnavailable as exc:  # a worker may start before its Redis: each partition is
                # checked before its first claim (echomq.worker.rotation)
                emit(log, logging.WARNING, "worker.layout_unchecked", tag=self.bus.tag, error=str(exc))
            self.fetcher.open()
            self.keeper.start()
            self._policy_unchecked = await check_eviction_policy(self.bus)
            emit(
                log,
                logging.INFO,
                "worker.started",
                owner=self.owner,
                tag=self.bus.tag,
                concurrency=self.concurrency,
                lease_ms=self.lease_ms,
                sweep_every_s=self.sweep_every_s,
            )
            await self._loop()
        finally:
            try:
                await self._drain()
                await self._release_lost()
                await self.completions.aclose()
            finally:  # even if cancelled again: a keeper left running would renew leases for ever
                self.keeper.stop()
                self.threads.shutdown()
                loop = asyncio.get_running_loop()
                for sig in self._signals:
                    loop.remove_signal_handler(sig)
                self._signals.clear()
                self._running = False
                await self.fetcher.aclose()
                emit(log, logging.INFO, "worker.stopped", owner=self.owner, **asdict(self.counts))

    async def _loop(self) -> None:
        errors = 0
        while not self._stopping.is_set():
            try:
                free = self.concurrency - len(self._tasks) - len(self._held_threads)
                gather = (
                    free < self._claim_at and self.completions.waiting and not self.fetcher.claim_unanswered
                )
                if free > 0 and not gather:
                    self._start(await self.fetcher.fetch(free))
                else:  # wait for slots to free up (or a timer), without a command
                    self._slot_freed.clear()
                    waits = [self._slot_freed.wait(), self._stopping.wait()]
                    await first_of(waits, self.fetcher.until_timer())
                    await self.fetcher.sweep_if_due()
                    if free == 0:
                        self.fetcher.want_claim()
                errors = 0
                if self._policy_unchecked:
                    self._policy_unchecked = await check_eviction_policy(self.bus)
            except (RedisUnavailable, ScriptError) as exc:  # unreachable, or refusing (OOM, READONLY, BUSY)
                pause = _BACKOFF_S[min(errors, len(_BACKOFF_S) - 1)]
                if self.fetcher.claim_unanswered:  # its record (and the jobs' leases) last one lease: ask
                    pause = min(pause, self.lease_ms / 4000)  # again well within it, however long it fails
                errors += 1
                emit(log, logging.WARNING, "worker.redis_error", error=str(exc), retry_in_s=pause)
                await first_of([self._stopping.wait()], pause)
                self.fetcher.want_claim()

    def _start(self, claims: list[Claim]) -> None:
        """Track the claims' leases and start a task for each (one lock round for the batch)."""
        if not claims:
            return
        started = [Job(claim) for claim in claims]
        self.keeper.track(started)
        debug = log.isEnabledFor(logging.DEBUG)
        for job in started:
            claim = job.claim
            task = asyncio.create_task(processor.process(self, job), name=f"echomq-job-{claim.job}")
            self._tasks[task] = job
            task.add_done_callback(self._task_done)
            if debug:
                emit(log, logging.DEBUG, "job.claimed", job=claim.job, lane=claim.lane, attempt=claim.token)
        self.counts.claimed += len(started)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        job = self._tasks.pop(task)
        self._slot_freed.set()
        if task.cancelled():  # shutdown and revocation untracked the claim already; anything else must
            self.keeper.untrack(job.claim)  # not leave its lease renewed for as long as the worker lives
            return
        exc = task.exception()
        if exc is not None:  # a bug in the processor: the job stays active until the sweep reclaims it
            self.keeper.untrack(job.claim)
            log.error("processor failed on %s", job.id, exc_info=exc)

    def _thread_returned(self, thread: asyncio.Future[Any]) -> None:
        self._held_threads.discard(thread)
        self._slot_freed.set()

    def _on_revoked(self, claim: Claim) -> None:
        """The keeper found ``claim``'s lease reaped (runs in the keeper thread)."""
        self.counts.revoked += 1  # the only writer of this field
        if self.handler_is_async and self._event_loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is over anyway
                self._event_loop.call_soon_threadsafe(self._cancel_revoked, claim)

    def _cancel_revoked(self, claim: Claim) -> None:
        """Cancel the async handler of a revoked claim: another run may own the job by now."""
        for task, job in self._tasks.items():
            if job.claim is claim:
                task.cancel()

    async def _drain(self) -> None:
        """Give in-flight jobs the grace period, then release the rest and cancel their tasks."""
        deadline = time.monotonic() + self.grace_s
        cancelled: asyncio.CancelledError | None = None
        try:
            while self._tasks and not self._hurry.is_set() and (left := deadline - time.monotonic()) > 0:
                self._slot_freed.clear()
                await first_of([self._slot_freed.wait(), self._hurry.wait()], left)
        except asyncio.CancelledError as exc:  # run() cancelled (again) in the grace: release at once
            cancelled = exc
        held = [(task, job) for task, job in self._tasks.items() if self.keeper.untrack(job.claim)]
        for task, job in held:  # still running its handler: give it back to its lane now
            job.revoked.set()
            task.cancel()
        await asyncio.gather(*(self._release(job) for _, job in held))
        finishing = set(self._tasks)  # a finish already on the wire: let it land, briefly
        if finishing:
            await asyncio.wait(finishing, timeout=_FINISH_WAIT_S)
            for task in finishing:
                task.cancel()
            await asyncio.gather(*finishing, return_exceptions=True)
        if cancelled is not None:
            raise cancelled

    async def _release_lost(self) -> None:
        """Release the jobs of a claim whose answer never came (its retry tells which), so they need not
        wait out their lease; left to the sweep if Redis does not answer within :data:`_FINISH_WAIT_S`."""
        try:
            async with asyncio.timeout(_FINISH_WAIT_S):
                lost = await self.fetcher.recover_lost()
        except (EchoMQError, TimeoutError) as exc:
            emit(log, logging.WARNING, "claim.unanswered", error=str(exc) or type(exc).__name__)
            return
        await asyncio.gather(*(self._release(Job(claim)) for claim in lost))

    async def _release(self, job: Job) -> None:
        try:  # a release whose reply was lost is answered RELEASED by its retry
            outcome = await processor.with_retries(self, job, lambda: self.bus.release(job.claim))
        except EchoMQError as exc:
            emit(log, logging.ERROR, "job.unfinished", job=job.id, attempt=job.attempt, error=str(exc))
            return
        if outcome is None:  # could not reach Redis: the sweep returns the job after its lease
            return
        if outcome is Release.RELEASED:
            self.counts.released += 1
            emit(log, logging.INFO, "job.released", job=job.id, lane=job.lane, attempt=job.attempt)
        else:
            self.counts.stale += 1
            emit(log, logging.WARNING, "job.stale", job=job.id, attempt=job.attempt, call="release")
