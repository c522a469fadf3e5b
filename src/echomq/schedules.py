"""Periodic schedules, pure: a :class:`Schedule` and its tick ids, and the catch-up policy of a scheduler
(:class:`Planner`: which ticks a step submits). No I/O and no clock: :mod:`echomq.periodic` (asyncio) and
:mod:`echomq.periodic_sync` (blocking) read the server's clock and send the jobs; the guarantees are
written down in :mod:`echomq.periodic`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from echomq import ids
from echomq._validate import check_int
from echomq.core import MAX_PAYLOAD, Settings
from echomq.cron import Interval, Timetable, parse
from echomq.errors import InvalidId, InvalidOption, InvalidSchedule
from echomq.jobs import MAX_ATTEMPTS_LIMIT, PRIORITY_LIMIT, Admitting, NewJob, check_bytes, enqueue_call
from echomq.keyspace import JOB_BRAND, check_lane
from echomq.states import Admission
from echomq.worker.logs import emit

DEFAULT_CATCH_UP_MS = 3_600_000
DEFAULT_MAX_CATCH_UP = 100
MIN_CATCH_UP_MS = 1_000  # a step must see the ticks since the last one: longer than a step's pause
MAX_CATCH_UP = 10_000
SAFETY_MS = 60_000  # the catch-up window stays this far inside the time an admitted id is remembered
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_DOMAIN = b"echomq.periodic/1"  # versions the derivation: a new one would mint other ids
logger = logging.getLogger("echomq.periodic")  # the events of a scheduler, from either module
T = TypeVar("T")


def check_name(name: object) -> str:
    """``name`` if it is 1-64 characters of ``[A-Za-z0-9_.:-]``, else InvalidOption."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidOption(f"a schedule name is 1-64 characters of [A-Za-z0-9_.:-], got {name!r}")
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A named timetable (``cron=`` an expression or ``@every ...``, or ``every_ms=``) and the job each tick
    enqueues; checked when made (:class:`~echomq.errors.InvalidInput`)."""

    name: str
    lane: str
    cron: str | None = None
    every_ms: int | None = None
    payload: bytes = b""
    max_attempts: int = 5
    priority: int = 0
    timetable: Timetable = field(init=False, repr=False, compare=False)
    key: bytes = field(init=False, repr=False, compare=False)  # the 8 bytes of every tick id's entropy

    def __post_init__(self) -> None:
        check_name(self.name)
        check_lane(self.lane)
        if (self.cron is None) == (self.every_ms is None):
            raise InvalidSchedule(
                f"schedule {self.name}: give either cron='...' or every_ms=N, not both or none"
            )
        timetable = parse(self.cron) if self.cron is not None else Interval(self.every_ms)  # type: ignore[arg-type]
        payload = check_bytes("payload", self.payload, MAX_PAYLOAD)
        check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS_LIMIT)
        check_int("priority", self.priority, -PRIORITY_LIMIT, PRIORITY_LIMIT)
        digest = hashlib.sha256()
        for part in (_DOMAIN, self.name, timetable.canonical, self.lane, hashlib.sha256(payload).digest()):
            data = part.encode() if isinstance(part, str) else part
            digest.update(len(data).to_bytes(4, "big") + data)
        object.__setattr__(self, "payload", payload)
        object.__setattr__(self, "timetable", timetable)
        object.__setattr__(self, "key", digest.digest()[:8])

    def tick_id(self, tick_ms: int) -> str:
        """The JOB id of the tick at ``tick_ms``: the same in every process, sorted by tick time."""
        if not self.timetable.matches(tick_ms):
            raise InvalidOption(f"{tick_ms} is not a tick of schedule {self.name}")
        return ids.from_body(JOB_BRAND, tick_ms.to_bytes(6, "big") + self.key)

    def job(self, tick_ms: int) -> NewJob:
        """The job the tick at ``tick_ms`` enqueues."""
        return NewJob(self.tick_id(tick_ms), self.lane, self.payload, self.max_attempts, self.priority)


@dataclass(frozen=True, slots=True)
class Tick:
    """One tick a step submitted, and what admission answered."""

    schedule: str
    at_ms: int
    job: str
    admission: Admission


@dataclass(frozen=True, slots=True)
class TickReport:
    """What one step did: the server time it read (the latest, over several nodes), the ticks it
    submitted, those the catch-up limit left out (``skipped``) or this host's clock could not admit
    (``refused``), and how long until the next tick of any schedule (ms, server clock)."""

    server_ms: int
    ticks: tuple[Tick, ...]
    skipped: int
    refused: int
    wait_ms: int

    @property
    def admitted(self) -> list[Tick]:
        return [t for t in self.ticks if t.admission is Admission.ADMITTED]


def catch_up_limit_ms(settings: Settings) -> int:
    """The longest catch-up window a bus with ``settings`` allows (see the module doc): the least time an
    admitted id answers DUPLICATE (while its row lives, then the longer of its set's ttl and the dedup
    window after it finished), bounded by the span admission accepts (``id_span_ms``), less SAFETY_MS."""
    kept = max(settings.dedup_window_ms, min(settings.result_ttl_ms, settings.dead_ttl_ms))
    return min(kept, settings.id_span_ms) - SAFETY_MS


class Planner:
    """The catch-up policy of one scheduler: which ticks a step submits, and what it has submitted. Pure:
    the caller reads the clock and sends the jobs (shared by :class:`Scheduler` and its sync twin)."""

    def __init__(
        self, schedules: Iterable[Schedule], settings: Settings, catch_up_ms: int, max_catch_up: int
    ) -> None:
        self.schedules = tuple(schedules)
        if not self.schedules or not all(isinstance(s, Schedule) for s in self.schedules):
            raise InvalidOption("a scheduler needs one or more Schedule objects")
        names = [s.name for s in self.schedules]
        if len(set(names)) != len(names):
            raise InvalidOption(f"schedule names are unique, got {sorted(names)}")
        for schedule in self.schedules:
            check_bytes(f"the payload of schedule {schedule.name}", schedule.payload, settings.max_payload)
        limit = catch_up_limit_ms(settings)
        if limit < MIN_CATCH_UP_MS:
            raise InvalidOption(
                "this bus forgets a finished id too soon for periodic jobs: raise its dedup_window_ms to at "
                f"least {MIN_CATCH_UP_MS + SAFETY_MS} ms (a re-submitted tick would be enqueued twice)"
            )
        self.catch_up_ms = check_int("catch_up_ms", catch_up_ms, MIN_CATCH_UP_MS, limit)
        self.max_catch_up = check_int("max_catch_up", max_catch_up, 1, MAX_CATCH_UP)
        self._last: dict[str, int] = {}

    def due(self, schedule: Schedule, now_ms: int) -> tuple[list[int], int]:
        """The ticks a step at server time ``now_ms`` submits for ``schedule``, and how many it skips."""
        start = max(self._last.get(schedule.name, 0), now_ms - self.catch_up_ms, 0)
        ticks, count = schedule.timetable.latest(start, max(start, now_ms), self.max_catch_up)
        return ticks, count - len(ticks)

    def submitted(self, schedule: Schedule, now_ms: int) -> None:
        """Record that every due tick of ``schedule`` up to ``now_ms`` was submitted (and answered)."""
        self._last[schedule.name] = max(self._last.get(schedule.name, 0), now_ms)

    def plan(
        self, schedules: Sequence[Schedule], now_ms: int, bus: Admitting
    ) -> tuple[list[tuple[Schedule, int, NewJob]], int, int]:
        """The jobs a step at ``now_ms`` submits for ``schedules`` (whose lanes are on ``bus``), with the
        counts of ticks skipped and refused (an id this host's clock may not admit)."""
        jobs: list[tuple[Schedule, int, NewJob]] = []
        skipped = refused = 0
        for schedule in schedules:
            ticks, left_out = self.due(schedule, now_ms)
            if left_out:
                emit(logger, logging.WARNING, "periodic.skipped", schedule=schedule.name, ticks=left_out)
            skipped += left_out
            for tick in ticks:
                job = schedule.job(tick)
                try:
                    enqueue_call(bus, job)
                except InvalidId as exc:  # the host's clock is far from the server's (check_recent)
                    emit(logger, logging.WARNING, "periodic.refused", schedule=schedule.name, reason=str(exc))
                    refused += 1
                    continue
                jobs.append((schedule, tick, job))
        return jobs, skipped, refused

    def wait_ms(self, schedules: Sequence[Schedule], now_ms: int) -> int:
        """How long from ``now_ms`` until the next tick of any of ``schedules``."""
        return min(s.timetable.next_after(now_ms) for s in schedules) - now_ms


def answered(planned: list[tuple[Schedule, int, NewJob]], admissions: list[Admission]) -> list[Tick]:
    """The ticks of a step, each with its admission, logged."""
    ticks = []
    for (schedule, tick, job), admission in zip(planned, admissions, strict=True):
        level = {Admission.ADMITTED: logging.INFO, Admission.CONFLICT: logging.ERROR}.get(
            admission, logging.DEBUG
        )
        emit(
            logger,
            level,
            "periodic.tick",
            schedule=schedule.name,
            tick=tick,
            job=job.job,
            admission=admission.value,
        )
        ticks.append(Tick(schedule.name, tick, job.job, admission))
    return ticks


def grouped(schedules: Sequence[Schedule], route: Callable[[str], T]) -> list[tuple[T, list[Schedule]]]:
    """``schedules`` grouped by ``route(lane)`` (the bus, hence the server clock, of each lane)."""
    groups: dict[int, tuple[T, list[Schedule]]] = {}
    for schedule in schedules:
        target = route(schedule.lane)
        groups.setdefault(id(target), (target, []))[1].append(schedule)
    return list(groups.values())
