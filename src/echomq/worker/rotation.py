"""The fetcher of a worker on a :class:`~echomq.partitions.PartitionedBus`: claims rotate across the
partitions, and an idle worker blocks on every partition's wake list at once.

It holds one :class:`~echomq.worker.fetcher.Fetcher` per partition (each sweeps its partition when due,
learns its due times and lease deadlines, and keeps its own unanswered claim, exactly as on one bus) and
decides which of them claims:

* **Rotation.** Each fetch starts at the next partition and claims there what the free slots allow,
  then goes on to the next partition that wants a claim, so every partition with work is visited at
  least once in every P fetches (the bound in :mod:`echomq.partitions`).
* **An unanswered claim first.** While a partition's claim has no answer, each fetch asks it again
  first (with the count it was sent with, so the retry replays it), and the other partitions claim
  into the free slots meanwhile; an answer that comes late with more jobs than the slots free then
  hands the surplus back to its lanes (a release: the try not counted).
* **A partition that fails rests, the others go on.** A claim, a sweep or a block of one partition that
  cannot reach its node (its master down, a failover under way, its slot moving) rests that partition
  for the worker's usual pause (0.5, 1, 2, then 5 s; at most a quarter lease while its claim is
  unanswered) while the others keep claiming and blocking; the jobs already claimed in that fetch are
  started, never dropped. Only when every partition fails does the fetch raise, and the worker pauses
  as on one bus.
* **Blocking.** A blocking command cannot span slots, so an idle worker holds one connection per
  partition (to the node that owns it), each blocked in ``BLPOP`` on its partition's wake list, and
  waits for the first to return. The claim is not pipelined behind the block as on one bus (the blocks
  would together claim up to P times the free slots): a partition whose block returns, with a token or
  at its timeout, is claimed from at once (one round trip more than on one bus). A block still running
  when the worker leaves its wait stays blocked; if it pops a token while the worker is busy, the
  token is pushed back to its wake list (passed on to an idle worker) and the partition is claimed
  from at the next fetch. At stop every block is cancelled at once (as on one bus), and a token is
  pushed back for each block that may have popped one (a spare token costs an idle worker one empty
  claim). So no token is lost with its block, and every block ends in a claim.

Idle cost: every partition costs what one bus costs (a block, a claim and a sweep per idle cap), so an
idle worker sends P times :data:`~echomq.worker.runner.IDLE_COMMANDS_PER_MIN` at most.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from echomq.errors import EchoMQError, RedisUnavailable, ScriptError, translate_redis_errors
from echomq.jobs import Claim
from echomq.partition_layout import check_partition
from echomq.partitions import PartitionedBus, partition_of
from echomq.worker.fetcher import _SLACK_S, Fetcher, first_of
from echomq.worker.logs import emit

log = logging.getLogger("echomq.worker")
REST_S = (0.5, 1.0, 2.0, 5.0)  # a failing partition's pauses (the worker's own, echomq.worker.runner)


class PartitionedFetcher:
    """Claims for one worker across the partitions of ``bus`` (see the module doc)."""

    def __init__(
        self,
        bus: PartitionedBus,
        *,
        lease_ms: int,
        owner: str,
        sweep_every_s: float,
        stopping: asyncio.Event,
    ) -> None:
        self.bus = bus
        self.lease_ms = lease_ms
        self.fetchers = [
            Fetcher(part, lease_ms=lease_ms, owner=owner, sweep_every_s=sweep_every_s, stopping=stopping)
            for part in bus.partitions
        ]
        self._stopping = stopping
        self._stop_watch: asyncio.Future[Any] | None = None
        self._cursor = 0
        self._blocks: dict[int, asyncio.Task[bool]] = {}  # partition -> its BLPOP
        self._waiting = False  # the worker is in a block's wait (a token popped now is for it)
        self._pushbacks: set[asyncio.Task[None]] = set()
        self._failures = [0] * len(self.fetchers)  # each partition's errors in a row
        self._rest_until = [0.0] * len(self.fetchers)  # monotonic: a failing partition rests until then
        self._laid_out = [False] * len(self.fetchers)  # each partition's i/P checked (before its claims)

    @property
    def idle_cap_s(self) -> float:
        return self.fetchers[0].idle_cap_s

    @idle_cap_s.setter
    def idle_cap_s(self, value: float) -> None:
        for fetcher in self.fetchers:
            fetcher.idle_cap_s = value

    def open(self) -> None:
        for fetcher in self.fetchers:
            fetcher.open()
        if self._stop_watch is None:
            self._stop_watch = asyncio.ensure_future(self._stopping.wait())
            self._stop_watch.add_done_callback(self._on_stop)

    def _on_stop(self, _: asyncio.Future[Any]) -> None:
        for task in self._blocks.values():  # at once, as on one bus (_returned passes their tokens on)
            task.cancel()

    async def aclose(self) -> None:
        if self._stop_watch is not None:
            self._stop_watch.remove_done_callback(self._on_stop)
            self._stop_watch.cancel()
            self._stop_watch = None
        for task in self._blocks.values():
            task.cancel()
        await asyncio.gather(*self._blocks.values(), return_exceptions=True)
        self._blocks.clear()
        await asyncio.gather(*self._pushbacks, return_exceptions=True)  # those the cancels made too
        for fetcher in self.fetchers:
            await fetcher.aclose()

    @property
    def claim_unanswered(self) -> bool:
        return any(f.claim_unanswered for f in self.fetchers)

    def want_claim(self) -> None:
        for fetcher in self.fetchers:
            fetcher.want_claim()

    def due_in(self, delay_s: float, lane: str | None = None) -> None:
        """A retry this worker scheduled on ``lane`` is due in ``delay_s`` (its partition wakes then)."""
        if lane is None:
            for fetcher in self.fetchers:
                fetcher.due_in(delay_s)
        else:
            self.fetchers[partition_of(lane, len(self.fetchers))].due_in(delay_s)

    def until_timer(self) -> float:
        return min(f.until_timer() for f in self.fetchers)

    def _resting(self, p: int) -> bool:
        return time.monotonic() < self._rest_until[p]

    def _rest(self, p: int, exc: BaseException) -> None:
        """Partition ``p`` failed: it rests (module doc) and claims when its rest ends."""
        pause = REST_S[min(self._failures[p], len(REST_S) - 1)]
        if self.fetchers[p].claim_unanswered:  # its record and the jobs' leases last one lease
            pause = min(pause, self.lease_ms / 4000)
        self._failures[p] += 1
        self._rest_until[p] = time.monotonic() + pause
        self.fetchers[p].want_claim()
        tag = self.bus.partitions[p].tag
        emit(log, logging.WARNING, "worker.partition_error", tag=tag, error=str(exc), retry_in_s=pause)

    async def _each(self, p: int, work: Any, errors: list[BaseException]) -> Any:
        """Await ``work`` (a call of partition ``p``); on a Redis error rest ``p`` and answer None."""
        try:
            done = await work
        except (RedisUnavailable, ScriptError) as exc:  # unreachable, or refusing (READONLY, BUSY)
            self._rest(p, exc)
            errors.append(exc)
            return None
        self._failures[p] = 0
        return done

    async def sweep_if_due(self) -> None:
        errors: list[BaseException] = []
        for p, fetcher in enumerate(self.fetchers):
            if not self._resting(p):
                await self._each(p, fetcher.sweep_if_due(), errors)
        if errors and all(self._resting(p) for p in range(len(self.fetchers))):
            raise errors[0]

    async def recover_lost(self) -> list[Claim]:
        """Every partition's unanswered claim's jobs; one that cannot be asked is left to its sweep."""
        lost: list[Claim] = []
        for p, fetcher in enumerate(self.fetchers):
            try:
                lost.extend(await fetcher.recover_lost())
            except EchoMQError as exc:
                emit(log, logging.WARNING, "claim.unanswered", tag=self.bus.partitions[p].tag, error=str(exc))
        return lost

    async def fetch(self, free: int) -> list[Claim]:
        """Up to ``free`` claimed jobs, partitions in rotation; ``[]`` after a block that ended with
        nothing claimed (the partitions it woke claim at the next fetch). Raises only when every
        partition failed (module doc)."""
        errors: list[BaseException] = []
        self._harvest(errors)
        jobs: list[Claim] = []
        for p, fetcher in enumerate(self.fetchers):  # unanswered claims first
            if fetcher.claim_unanswered and not self._resting(p):
                jobs.extend(await self._each(p, fetcher.claim_step(free), errors) or [])
        if len(jobs) > free:
            jobs = await self._hand_back(jobs, free)
        size = len(self.fetchers)
        start, self._cursor = self._cursor % size, self._cursor + 1
        for step in range(size):
            p = (start + step) % size
            if len(jobs) >= free:
                break
            if self.fetchers[p].claim_unanswered or self._resting(p):
                continue
            if await self._checked(p, errors):
                jobs.extend(await self._each(p, self.fetchers[p].claim_step(free - len(jobs)), errors) or [])
        if jobs:
            return jobs
        if errors and all(self._resting(p) for p in range(size)):
            raise errors[0]  # every partition failing: the worker pauses, as on one bus
        await self._block()
        return []

    async def _checked(self, p: int, errors: list[BaseException]) -> bool:
        """Partition ``p``'s layout is checked before its first claim (a worker started while it was
        unreachable checks it here); one of another P raises InvalidOption, which stops the worker."""
        if not self._laid_out[p]:
            await self._each(p, check_partition(self.bus.partitions, p), errors)
            self._laid_out[p] = not self._resting(p)
        return self._laid_out[p]

    async def _hand_back(self, jobs: list[Claim], free: int) -> list[Claim]:
        """An unanswered claim answered late with more jobs than the slots free now (the other
        partitions claimed meanwhile): the surplus goes back to its lanes (its try not counted); one
        that cannot be handed back runs, above the concurrency for a while, rather than wait out its
        lease."""
        keep = jobs[:free]
        for claim in jobs[free:]:
            try:
                await self.bus.release(claim)
            except EchoMQError:
                keep.append(claim)
        return keep

    async def _block(self) -> None:
        """Block on every partition's wake list (those not resting) until one returns, the next timer,
        a resting partition's end of rest, or stop."""
        await asyncio.sleep(0)  # the handlers of the jobs just claimed start before the blocks are sent
        now = time.monotonic()
        rests = [until - now for p, until in enumerate(self._rest_until) if self._resting(p)]
        timeout = min(self.idle_cap_s, self.until_timer(), *rests)
        if timeout <= _SLACK_S or self._stopping.is_set():
            await first_of([self._stopping.wait()], timeout)
            return
        for p, fetcher in enumerate(self.fetchers):
            if p not in self._blocks and not self._resting(p):
                task = asyncio.ensure_future(fetcher.pickup.wait(timeout))
                task.add_done_callback(functools.partial(self._returned, p))
                self._blocks[p] = task
        stop = asyncio.ensure_future(self._stopping.wait())
        self._waiting = True
        try:
            await asyncio.wait(
                [*self._blocks.values(), stop], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self._waiting = False
            stop.cancel()

    def _returned(self, p: int, task: asyncio.Task[bool]) -> None:
        """A block returned: a token popped while the worker is busy or stopping is passed on, and so
        is one for a block cancelled at stop, which may have popped one (module doc)."""
        stopping = self._stopping.is_set()
        if task.cancelled():
            popped = stopping
        else:
            popped = task.exception() is None and task.result() and (stopping or not self._waiting)
        if popped:
            pushback = asyncio.ensure_future(self._push_back(p))
            self._pushbacks.add(pushback)
            pushback.add_done_callback(self._pushbacks.discard)

    async def _push_back(self, p: int) -> None:
        bus = self.bus.partitions[p]
        try:
            with translate_redis_errors():
                await bus.redis.lpush(bus.keys.wake, "1")
        except EchoMQError as exc:  # the token is lost: an idle worker's block ends in a claim anyway
            emit(log, logging.WARNING, "worker.token_lost", tag=bus.tag, error=str(exc))

    def _harvest(self, errors: list[BaseException]) -> None:
        """Every block that returned makes its partition claim next; a failed one rests its partition."""
        for p, task in list(self._blocks.items()):
            if not task.done():
                continue
            del self._blocks[p]
            self.fetchers[p].want_claim()
            if not task.cancelled() and (exc := task.exception()) is not None:
                if not isinstance(exc, EchoMQError):
                    raise exc
                self._rest(p, exc)
                errors.append(exc)
