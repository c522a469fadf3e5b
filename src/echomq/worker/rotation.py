"""The fetcher of a worker on a :class:`~echomq.partitions.PartitionedBus`: claims rotate across the
partitions, and an idle worker blocks on every partition's wake list at once.

It holds one :class:`~echomq.worker.fetcher.Fetcher` per partition (each sweeps its partition when due,
learns its due times and lease deadlines, and keeps its own unanswered claim, exactly as on one bus) and
decides which of them claims:

* **Rotation.** Each fetch starts at the next partition and claims there what the free slots allow,
  then goes on to the next partition that wants a claim, so every partition with work is visited at
  least once in every P fetches (the bound in :mod:`echomq.partitions`).
* **An unanswered claim first.** While a partition's claim has no answer, the fetch only asks it again
  (its jobs are active under this worker and fit the slots it was sent for: nothing else was claimed
  since), and nothing new is claimed anywhere.
* **Blocking.** A blocking command cannot span slots, so an idle worker holds one connection per
  partition (to the node that owns it), each blocked in ``BLPOP`` on its partition's wake list, and
  waits for the first to return. The claim is not pipelined behind the block as on one bus (the blocks
  would together claim up to P times the free slots): a partition whose block returns, with a token or
  at its timeout, is claimed from at once (one round trip more than on one bus). A block still running
  when the worker leaves its wait stays blocked; if it pops a token while the worker is busy, the
  token is pushed back to its wake list (passed on to an idle worker) and the partition is claimed
  from at the next fetch. So no token is lost with its block, and every block ends in a claim.

Idle cost: every partition costs what one bus costs (a block, a claim and a sweep per idle cap), so an
idle worker sends P times :data:`~echomq.worker.runner.IDLE_COMMANDS_PER_MIN` at most.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from echomq.errors import EchoMQError, translate_redis_errors
from echomq.jobs import Claim
from echomq.partitions import PartitionedBus, partition_of
from echomq.worker.fetcher import _SLACK_S, Fetcher, first_of
from echomq.worker.logs import emit

log = logging.getLogger("echomq.worker")


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
        self.fetchers = [
            Fetcher(part, lease_ms=lease_ms, owner=owner, sweep_every_s=sweep_every_s, stopping=stopping)
            for part in bus.partitions
        ]
        self._stopping = stopping
        self._cursor = 0
        self._blocks: dict[int, asyncio.Task[bool]] = {}  # partition -> its BLPOP
        self._waiting = False  # the worker is in a block's wait (a token popped now is for it)
        self._pushbacks: set[asyncio.Task[None]] = set()

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

    async def aclose(self) -> None:
        for task in self._blocks.values():
            task.cancel()
        await asyncio.gather(*self._blocks.values(), *self._pushbacks, return_exceptions=True)
        self._blocks.clear()
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

    async def sweep_if_due(self) -> None:
        for fetcher in self.fetchers:
            await fetcher.sweep_if_due()

    async def recover_lost(self) -> list[Claim]:
        lost: list[Claim] = []
        for fetcher in self.fetchers:
            lost.extend(await fetcher.recover_lost())
        return lost

    async def fetch(self, free: int) -> list[Claim]:
        """Up to ``free`` claimed jobs, partitions in rotation; ``[]`` after a block that ended with
        nothing claimed (the partitions it woke claim at the next fetch)."""
        self._harvest()
        unanswered = [f for f in self.fetchers if f.claim_unanswered]
        if unanswered:  # asked again before anything else: its jobs fit the slots it was sent for
            jobs: list[Claim] = []
            for fetcher in unanswered:
                jobs.extend(await fetcher.claim_step(free))
            return jobs
        size = len(self.fetchers)
        start, self._cursor = self._cursor % size, self._cursor + 1
        jobs = []
        for step in range(size):
            if len(jobs) == free:
                break
            jobs.extend(await self.fetchers[(start + step) % size].claim_step(free - len(jobs)))
        if jobs:
            return jobs
        await self._block()
        return []

    async def _block(self) -> None:
        """Block on every partition's wake list until one returns, the next timer or stop."""
        await asyncio.sleep(0)  # the handlers of the jobs just claimed start before the blocks are sent
        timeout = min(self.idle_cap_s, self.until_timer())
        if timeout <= _SLACK_S or self._stopping.is_set():
            await first_of([self._stopping.wait()], timeout)
            return
        for p, fetcher in enumerate(self.fetchers):
            if p not in self._blocks:
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
        self._harvest()

    def _returned(self, p: int, task: asyncio.Task[bool]) -> None:
        """A block returned: a token popped while the worker is busy is passed on (module doc)."""
        popped = not task.cancelled() and task.exception() is None and task.result()
        if popped and not self._waiting and not self._stopping.is_set():
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

    def _harvest(self) -> None:
        """Every block that returned makes its partition claim next; a failed one raises (after all
        are harvested) so the worker pauses as after any Redis error."""
        error: BaseException | None = None
        for p, task in list(self._blocks.items()):
            if not task.done():
                continue
            del self._blocks[p]
            self.fetchers[p].want_claim()
            if not task.cancelled() and task.exception() is not None:
                error = error or task.exception()
        if error is not None:
            raise error
