"""The blocking scheduler: :class:`SyncScheduler` submits periodic ticks through a :class:`~echomq.SyncBus`
(a cron-like process, a thread of a WSGI application), with the same tick ids, clock, catch-up policy
and guarantees as the asyncio :class:`~echomq.periodic.Scheduler` (see :mod:`echomq.periodic`): the
two kinds can run side by side on one bus and still enqueue each tick once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

import redis.cluster

from echomq.errors import RedisUnavailable, ScriptError, translate_redis_errors
from echomq.periodic import MAX_SLEEP_S, RETRY_S
from echomq.schedules import (
    DEFAULT_CATCH_UP_MS,
    DEFAULT_MAX_CATCH_UP,
    Planner,
    Schedule,
    TickReport,
    answered,
    logger,
)
from echomq.sync import SyncBus
from echomq.worker.logs import emit


def server_ms(bus: SyncBus) -> int:
    """The server clock of ``bus`` (TIME; on a cluster, of the node holding the bus's slot), in ms."""
    with translate_redis_errors():
        if isinstance(bus.redis, redis.cluster.RedisCluster):
            node = bus.redis.get_node_from_key(bus.keys.ring)  # type: ignore[no-untyped-call]
            now = bus.redis.execute_command("TIME", target_nodes=node)  # type: ignore[no-untyped-call]
        else:
            now = bus.redis.time()
    return int(now[0]) * 1000 + int(now[1]) // 1000


class SyncScheduler:
    """Submits the due ticks of ``schedules`` to the blocking ``bus``; see :mod:`echomq.periodic`."""

    def __init__(
        self,
        bus: SyncBus,
        schedules: Iterable[Schedule],
        *,
        catch_up_ms: int = DEFAULT_CATCH_UP_MS,
        max_catch_up: int = DEFAULT_MAX_CATCH_UP,
    ) -> None:
        self.bus = bus
        self.planner = Planner(schedules, bus.settings, catch_up_ms, max_catch_up)
        self._stop = threading.Event()

    def tick_once(self) -> TickReport:
        """One step, as :meth:`echomq.periodic.Scheduler.tick_once`: read the server clock, submit every due
        tick; a failed call raises and records nothing as submitted (the next step sends them again)."""
        schedules = self.planner.schedules
        now = server_ms(self.bus)
        planned, skipped, refused = self.planner.plan(schedules, now, self.bus)
        admissions = self.bus.enqueue_many([job for _, _, job in planned]) if planned else []
        for schedule in schedules:
            self.planner.submitted(schedule, now)
        ticks = answered(planned, admissions)
        return TickReport(now, tuple(ticks), skipped, refused, self.planner.wait_ms(schedules, now))

    def run(self) -> None:
        """Step until :meth:`stop` (from another thread or a signal handler), as the asyncio run() does."""
        emit(logger, logging.INFO, "periodic.started", schedules=len(self.planner.schedules))
        while not self._stop.is_set():
            try:
                report = self.tick_once()
                delay = min(MAX_SLEEP_S, (report.wait_ms + 1) / 1000)
            except (RedisUnavailable, ScriptError) as exc:
                emit(logger, logging.WARNING, "periodic.redis_error", error=f"{type(exc).__name__}: {exc}")
                delay = RETRY_S
            self._stop.wait(delay)
        emit(logger, logging.INFO, "periodic.stopped")

    def stop(self) -> None:
        """Make :meth:`run` return after its current step."""
        self._stop.set()
