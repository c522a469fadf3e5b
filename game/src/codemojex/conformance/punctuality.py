"""Punctuality: a job due at a time runs then, and a dead worker's jobs run again at once, on every
idle worker that can take them.

Figures, from the handler starts (:mod:`.starts`) and the due times Redis held:

* lateness past due of retries (a handler failure, then the bus's backoff through ``delayed``; the
  harness's workers fail a share of first deliveries) and of delayed jobs: the claim of the next
  delivery less the due time, both on the server clock. :class:`DueWatch` samples ``delayed`` during
  the run to learn each due time;
* after a worker's death, the time until each job it held starts again (``rerun``), and how many
  distinct workers ran them (``spread``).

Under load every worker is busy and both look fine whatever the fetcher does, so :func:`quiet_phase`
measures them where a lapse shows: with idle workers, after the drain. One idle worker, whose sweep
period is :data:`QUIET_SWEEP_S`, gets delayed jobs due one after another more than a sweep period apart,
and jobs whose first delivery fails (a backoff longer than the sweep period); then a worker holding
three workers' worth of jobs is SIGKILLed while that many idle workers wait. Lateness is a figure (a
report never fails on a time); the spread is a check: reclaimed jobs that no one worker's slots can
hold must be run by as many of the idle workers as they can use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import redis

from codemojex.conformance.starts import PROBE_LANE, Starts, is_ready, read_starts
from codemojex.keys import JOB
from echomq import Bus, NewJob, RedisUnavailable, ids
from echomq import rows as bus_rows
from echomq.keyspace import Keyspace

Client = Any  # a blocking redis.Redis
Kill = tuple[int, list[tuple[str, int]]]  # (server ms of the death, the jobs held with their token)

QUIET_SWEEP_S = 1.0  # the quiet workers' sweep period: a due time forgotten costs up to this much
DELAYED_PROBES = 4
RETRY_PROBES = 2
RERUN_HOLD_MS = 500  # a reclaimed probe holds its slot this long: one worker cannot run them all at once
HOARD_HOLD_MS = 600_000  # the doomed worker's first deliveries hold until it is killed


class DueWatch:
    """Samples the ``delayed`` set: every (job, due time) it held, so a retry's due time is known."""

    def __init__(self, client: Client, keys: Keyspace, every_s: float = 0.1) -> None:
        self.client = client
        self.keys = keys
        self.every_s = every_s
        self.dues: dict[str, set[int]] = {}

    def take(self) -> None:
        try:
            pairs = self.client.zrange(self.keys.delayed, 0, -1, withscores=True)
        except redis.RedisError:
            return
        for member, score in pairs:
            self.dues.setdefault(member.decode(), set()).add(int(score))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.take)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)


def lateness(dues: dict[str, set[int]], starts: Starts, only: set[str] | None = None) -> list[int]:
    """Past due (ms) of each due time seen: the first start of that job claimed at or after it."""
    late = []
    for job, times in dues.items():
        if only is not None and job not in only:
            continue
        for due in times:
            start = starts.first_after(job, due)
            if start is not None:
                late.append(start.claimed_ms - due)
    return sorted(late)


def after_deaths(kills: list[Kill], starts: Starts) -> tuple[list[int], list[int]]:
    """For each job a dead worker held: ms from its death to the job's next start (a higher token);
    and for each death, how many distinct workers ran its jobs again."""
    rerun: list[int] = []
    spreads: list[int] = []
    for died_at, held in kills:
        runners = set()
        for job, token in held:
            start = starts.first_after(job, 0, token_above=token)
            if start is not None:
                rerun.append(max(0, start.claimed_ms - died_at))
                runners.add(start.pid)
        if runners:
            spreads.append(len(runners))
    return sorted(rerun), spreads


def spread_check(held: int, runners: int, idle: int, concurrency: int) -> list[str]:
    """Reclaimed jobs more than one worker can hold must be run by as many idle workers as they fill."""
    wanted = min(idle, math.ceil(held / concurrency))
    if held and runners < wanted:
        return [
            (
                f"a dead worker's {held} reclaimed jobs ({math.ceil(held / concurrency)} workers' slots) "
                f"were run by {runners} of the {idle} idle workers: the others were never woken"
            )
        ]
    return []


class Pool(Protocol):
    """What the quiet phase needs of the harness's worker pool."""

    async def retire_all(self) -> None: ...
    def spawn_quiet(self, *, concurrency: int | None = None, backoff_base_ms: int | None = None) -> Any: ...
    async def kill(self, process: Any) -> None: ...


@dataclass
class Quiet:
    """What the quiet phase saw."""

    delayed_late_ms: list[int] = field(default_factory=list)
    retry_late_ms: list[int] = field(default_factory=list)
    rerun_ms: list[int] = field(default_factory=list)
    held: int = 0
    runners: int = 0
    idle: int = 0
    violations: list[str] = field(default_factory=list)


@dataclass
class QuietPhase:
    pool: Pool
    bus: Bus
    client: Client
    starts_dir: Path
    concurrency: int
    workers: int
    lease_ms: int
    held_by: Callable[[int], Kill | None]
    timeout_s: float = 60.0

    async def run(self) -> Quiet:
        quiet = Quiet()
        await self._due_times(quiet)
        await self._after_a_death(quiet)
        await self.pool.retire_all()
        return quiet

    async def _due_times(self, quiet: Quiet) -> None:
        await self.pool.retire_all()
        one = self.pool.spawn_quiet(backoff_base_ms=int(2500 * QUIET_SWEEP_S))  # backoff > the period
        await self._ready([one.pid])
        await asyncio.sleep(0.3)  # into its first block
        due: dict[str, int] = {}
        for n in range(DELAYED_PROBES):
            delay_ms = int(
                (n + 1) * (QUIET_SWEEP_S + 0.3) * 1000
            )  # each due more than a period after the last
            job = await self._probe(f"d{n}", {}, delay_ms)
            at = await asyncio.to_thread(self._due_of, job)
            if at is not None:
                due[job] = at
        retries = {await self._probe(f"r{n}", {"fail_first": True}) for n in range(RETRY_PROBES)}
        watch = DueWatch(self.client, self.bus.keys, every_s=0.05)
        stop = asyncio.Event()
        watching = asyncio.create_task(watch.run(stop))
        try:
            finished = await self._finished({*due, *retries})
        finally:
            stop.set()
            await watching
        if not finished:
            quiet.violations.append("the quiet phase's delayed jobs and retries did not all finish")
        starts = read_starts(self.starts_dir)
        quiet.delayed_late_ms = lateness({job: {at} for job, at in due.items()}, starts)
        quiet.retry_late_ms = lateness(watch.dues, starts, only=retries)

    async def _after_a_death(self, quiet: Quiet) -> None:
        await self.pool.retire_all()
        hoard = 3 * self.concurrency
        doomed = self.pool.spawn_quiet(concurrency=hoard)
        await self._ready([doomed.pid])
        spec = {"hold_ms": HOARD_HOLD_MS, "rerun_ms": RERUN_HOLD_MS}
        jobs = [await self._probe(f"s{n}", spec) for n in range(hoard)]
        if not await self._until(lambda: self._started_by(jobs, doomed.pid)):
            quiet.violations.append(f"the doomed worker did not take all {hoard} probe jobs")
            return
        idle = [self.pool.spawn_quiet() for _ in range(self.workers)]
        await self._ready([p.pid for p in idle])
        await asyncio.sleep(self.lease_ms / 1000 + 0.3)  # idle and blocked; its leases renewed together
        await self.pool.kill(doomed)
        death = await asyncio.to_thread(self.held_by, doomed.pid)
        if not await self._finished(set(jobs)):
            quiet.violations.append("a dead worker's probe jobs did not all finish")
        if death is None:
            return
        rerun, spreads = after_deaths([death], read_starts(self.starts_dir))
        quiet.rerun_ms = rerun
        quiet.held, quiet.runners, quiet.idle = len(death[1]), (spreads or [0])[0], len(idle)
        quiet.violations += spread_check(quiet.held, quiet.runners, quiet.idle, self.concurrency)

    # -- helpers -----------------------------------------------------------------------------------

    async def _probe(self, name: str, spec: dict[str, Any], delay_ms: int = 0) -> str:
        """Enqueue a probe job, retried with the same id until Redis answers (a connection the faults
        left broken fails once; an enqueue is idempotent on its id)."""
        job = ids.mint(JOB)
        new = NewJob(job, f"{PROBE_LANE}.{name}", json.dumps(spec).encode(), delay_ms=delay_ms)
        for _ in range(50):
            try:
                await self.bus.enqueue_many([new])
            except RedisUnavailable:
                await asyncio.sleep(0.1)
                continue
            return job
        raise RedisUnavailable("the quiet phase could not enqueue a probe")

    def _due_of(self, job: str) -> int | None:
        with contextlib.suppress(redis.RedisError):
            score = self.client.zscore(self.bus.keys.delayed, job)
            return None if score is None else int(score)
        return None

    def _started_by(self, jobs: list[str], pid: int) -> bool:
        starts = read_starts(self.starts_dir, [pid])
        return all(starts.ran(job) for job in jobs)

    async def _ready(self, pids: list[int]) -> None:
        await self._until(lambda: all(is_ready(self.starts_dir, pid) for pid in pids))

    async def _finished(self, jobs: set[str]) -> bool:
        keys = self.bus.keys

        def done() -> bool:
            states = [self.client.hget(keys.job(job), bus_rows.STATE) for job in jobs]
            return all(state == b"done" for state in states)

        return await self._until(done)

    async def _until(self, condition: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.RedisError):
                if await asyncio.to_thread(condition):
                    return True
            await asyncio.sleep(0.05)
        return False
