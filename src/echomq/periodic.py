"""Periodic jobs: schedules whose every tick is enqueued once, by any number of schedulers, with no leader.

A :class:`Schedule` names a timetable (:mod:`echomq.cron`: a cron expression or a fixed interval, in
UTC) and the job each tick enqueues: its lane, payload, max attempts and priority. A :class:`Scheduler`
submits the due ticks of its schedules to a bus, one step at a time (:meth:`Scheduler.tick_once`) or
until stopped (:meth:`Scheduler.run`); :class:`echomq.periodic_sync.SyncScheduler` does the same on a
:class:`~echomq.SyncBus`. Guarantees:

* **Each tick once, with no leader.** A tick's job id is :meth:`Schedule.tick_id`: a JOB id whose time
  part is the tick time and whose 8 bytes of entropy are a digest of the schedule's identity: its name,
  its timetable's meaning (:attr:`echomq.cron.Cron.canonical`), its lane and its payload's digest. Every
  scheduler computes the same id for the same tick, and admission (enqueue.lua) is idempotent on the id:
  the first submission is ``ADMITTED``, every other one ``DUPLICATE``. Run several schedulers for
  availability; none coordinates with another, and one that dies costs nothing while another runs.
* **The server's clock decides.** Each step reads the Redis server's ``TIME`` (on a cluster, the clock of
  the node that holds the schedule's lane) and submits the ticks at or before it; the host's clock is
  never read to decide a tick, so schedulers on hosts whose clocks disagree submit the same ticks at the
  same moments. (Admission still refuses an id more than ``Settings.id_span_ms`` from the host's clock,
  :func:`echomq.ids.check_recent`: a host off by that much has its ticks counted as ``refused`` and
  logged, and the other schedulers enqueue them.)
* **Catch-up.** Each step submits, per schedule, the ticks of the window ``(max(last, now - catch_up_ms),
  now]``, where ``last`` is the server time of this process's last successful step; of those, only the
  latest ``max_catch_up`` (the others are counted as ``skipped`` and logged). So a scheduler that starts,
  or comes back after a pause, re-submits the ticks of the last ``catch_up_ms`` (default 1 h, at most the
  latest 100): those another scheduler enqueued are duplicates, those nobody enqueued (every scheduler
  was down) are enqueued late. A tick older than the window is never enqueued.
* **Why the window is bounded by the dedup window.** An id absorbs duplicates while its row exists and,
  once finished, for the longer of its set's ttl and ``Settings.dedup_window_ms`` (its tombstone). A
  scheduler must therefore never submit a tick after its id may be forgotten: ``catch_up_ms`` is refused
  above :func:`catch_up_limit_ms` (that horizon, and the id span, less a minute). When the dedup window
  is shorter than a schedule's period, each tick's tombstone expires before the next tick: nothing
  remembers the last tick, and nothing needs to: ticks have different times, so their ids differ in
  their time part and can never collide, and no scheduler re-submits a tick that old.
* **A changed schedule** (another timetable, lane or payload) mints other ids, so its ticks are
  admitted even where the old definition's ticks were (same lane and id but another payload would be a
  ``CONFLICT``, never enqueued). While old and new definitions run side by side, each enqueues its own
  ticks: stop the old schedulers first. A timetable spelled otherwise (``@daily``, ``0 0 * * *``) is
  the same schedule. Max attempts and priority are options of a tick's job, not part of its identity:
  changing them keeps the ids (a tick already admitted keeps its options).
* **Lost replies.** A step's admissions can run and their reply never arrive. The client's retry, or the
  next step (a failed step records nothing as submitted), submits the same ids again and is answered
  ``DUPLICATE``: the tick is enqueued once, and that report says DUPLICATE although this process's first
  try admitted it. A DUPLICATE means "enqueued", by someone.
* **Bad input changes nothing**: a bad schedule raises :class:`~echomq.errors.InvalidInput` (a bad
  timetable :class:`~echomq.errors.InvalidSchedule`) when made, a bad scheduler when made, before any
  call to Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from redis.asyncio import RedisCluster

from echomq.errors import RedisUnavailable, ScriptError, translate_redis_errors
from echomq.jobs import NewJob
from echomq.schedules import (
    DEFAULT_CATCH_UP_MS,
    DEFAULT_MAX_CATCH_UP,
    Planner,
    Schedule,
    Tick,
    TickReport,
    answered,
    catch_up_limit_ms,
    grouped,
    logger,
)
from echomq.worker.logs import emit

if TYPE_CHECKING:
    from echomq.bus import Bus
    from echomq.partitions import AnyBus

__all__ = ["Schedule", "Scheduler", "Tick", "TickReport", "catch_up_limit_ms", "server_ms"]

# A scheduler sleeps until the next tick by its host's monotonic clock, but reads the server's clock at
# least this often, so a server clock that stepped (a failover to another machine) is followed soon.
MAX_SLEEP_S = 5.0
RETRY_S = 1.0  # the pause after a step that could not reach Redis


async def server_ms(bus: Bus) -> int:
    """The server clock of ``bus`` (TIME; on a cluster, of the node holding the bus's slot), in ms."""
    with translate_redis_errors():
        if isinstance(bus.redis, RedisCluster):
            node = bus.redis.get_node_from_key(bus.keys.ring)
            now = await bus.redis.execute_command("TIME", target_nodes=node)
        else:
            now = await bus.redis.time()
    return int(now[0]) * 1000 + int(now[1]) // 1000


class Scheduler:
    """Submits the due ticks of ``schedules`` to ``bus`` (a :class:`~echomq.Bus` or
    :class:`~echomq.PartitionedBus`); see the module doc for the guarantees and the catch-up policy."""

    def __init__(
        self,
        bus: AnyBus,
        schedules: Iterable[Schedule],
        *,
        catch_up_ms: int = DEFAULT_CATCH_UP_MS,
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
    ) -> None:
        self.bus = bus
        self.planner = Planner(schedules, bus.settings, catch_up_ms, max_catch_up)
        self._groups = grouped(self.planner.schedules, bus.route)
        self._stop = asyncio.Event()

    async def tick_once(self) -> TickReport:
        """One step: read the server clock, submit every due tick, return what admission answered.

        Raises :class:`~echomq.errors.RedisUnavailable` (or ScriptError) when a call fails; then no tick
        is recorded as submitted, and the next step submits them again (a DUPLICATE where one ran)."""
        steps = []
        planned: list[tuple[Schedule, int, NewJob]] = []
        skipped = refused = 0
        wait_ms = None
        for bus, schedules in self._groups:
            now = await server_ms(bus)
            jobs, left_out, refusals = self.planner.plan(schedules, now, bus)
            planned += jobs
            skipped, refused = skipped + left_out, refused + refusals
            steps.append((schedules, now))
            wait = self.planner.wait_ms(schedules, now)
            wait_ms = wait if wait_ms is None else min(wait_ms, wait)
        admissions = await self.bus.enqueue_many([job for _, _, job in planned]) if planned else []
        for schedules, now in steps:
            for schedule in schedules:
                self.planner.submitted(schedule, now)
        ticks = answered(planned, admissions)
        assert wait_ms is not None
        return TickReport(max(now for _, now in steps), tuple(ticks), skipped, refused, wait_ms)

    async def run(self) -> None:
        """Step until :meth:`stop`: after each step, sleep until the next tick (at most MAX_SLEEP_S); a step
        that cannot reach Redis is logged and tried again after RETRY_S."""
        emit(logger, logging.INFO, "periodic.started", schedules=len(self.planner.schedules))
        while not self._stop.is_set():
            try:
                report = await self.tick_once()
                delay = min(MAX_SLEEP_S, (report.wait_ms + 1) / 1000)
            except (RedisUnavailable, ScriptError) as exc:
                emit(logger, logging.WARNING, "periodic.redis_error", error=f"{type(exc).__name__}: {exc}")
                delay = RETRY_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)
        emit(logger, logging.INFO, "periodic.stopped")

    def stop(self) -> None:
        """Make :meth:`run` return after its current step."""
        self._stop.set()
