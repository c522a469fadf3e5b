"""What a run watches besides the players' answers, and what the checks make of it.

During the players and the drain: memory (:class:`.memory.MemoryWatch`) and the due times of retries
(:class:`.punctuality.DueWatch`); all along, the workers' handler starts (:mod:`.starts`); after the
drain, the quiet phase (:class:`.punctuality.QuietPhase`). :meth:`Observers.check` turns them into
violations (memory bounds, dead letters no handler ran, the spread of a dead worker's jobs) and the
report's memory and punctuality figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis

from codemojex.conformance import invariants, memory, punctuality
from codemojex.conformance.memory import MemoryWatch, Sample
from codemojex.conformance.punctuality import DueWatch, Kill, Quiet
from codemojex.conformance.starts import read_starts
from echomq.keyspace import Keyspace

Client = Any  # a blocking redis.Redis
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Bounds:
    result_ttl_ms: int
    window_ms: int
    slack: int
    sweep_ms: int  # the workers' sweep period

    @property
    def grace_ms(self) -> int:
        """How long past its TTL a done row may wait for a sweep to trim it."""
        return self.window_ms + self.sweep_ms


@dataclass
class Observers:
    keys: Keyspace
    bounds: Bounds
    starts_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="conformance-starts-")))
    samples: list[Sample] = field(default_factory=list)
    start: Sample | None = None
    end: Sample | None = None
    dues: dict[str, set[int]] = field(default_factory=dict)
    quiet: Quiet | None = None

    def sample(self, client: Client) -> Sample | None:
        with contextlib.suppress(redis.RedisError):
            return memory.sample(client, self.keys, self.bounds.result_ttl_ms, self.bounds.grace_ms)
        return None

    async def during(self, client: Client, work: Awaitable[T]) -> T:
        """Await ``work`` while memory and the due times are sampled; the run's start and end samples."""
        self.start = await asyncio.to_thread(self.sample, client)
        watch = MemoryWatch(client, self.keys, self.bounds.result_ttl_ms, self.bounds.grace_ms)
        due = DueWatch(client, self.keys)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(watch.run(stop)), asyncio.create_task(due.run(stop))]
        try:
            return await work
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            self.samples += watch.samples
            self.dues = due.dues
            self.end = await asyncio.to_thread(self.sample, client)

    def check(
        self, client: Client, rows: dict[str, dict[str, str]], lost_holders: set[int], kills: list[Kill]
    ) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
        """Violations, the memory figures and the punctuality figures (lists of ms, and counts)."""
        starts = read_starts(self.starts_dir)
        violations = invariants.dead_unhandled(rows, starts, lost_holders)
        now = self.sample(client)  # a recheck sees the state as it is now
        samples = [*self.samples, *([now] if now else [])]
        b = self.bounds
        violations += memory.bounds(samples, b.result_ttl_ms, b.window_ms, b.slack, b.sweep_ms)
        rerun, spreads = punctuality.after_deaths(kills, starts)
        quiet = self.quiet or Quiet()
        violations += quiet.violations
        figures = {
            "handler_starts": sum(len(s) for s in starts.by_job.values()),
            "retry_late_ms": punctuality.lateness(self.dues, starts),
            "rerun_ms": rerun,
            "spread": spreads,
            "quiet_delayed_late_ms": quiet.delayed_late_ms,
            "quiet_retry_late_ms": quiet.retry_late_ms,
            "quiet_rerun_ms": quiet.rerun_ms,
            "quiet_held": quiet.held,
            "quiet_runners": quiet.runners,
            "quiet_idle": quiet.idle,
        }
        return violations, memory.figures(samples, self.start, self.end), figures

    def close(self) -> None:
        shutil.rmtree(self.starts_dir, ignore_errors=True)
