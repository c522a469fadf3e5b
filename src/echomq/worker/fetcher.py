"""The fetcher: when a worker claims, when it blocks on the wake list, and when it sweeps.

Blocking happens outside Lua, claiming inside it. The fetcher claims a batch for the worker's free slots;
when the claim comes back short, the ring was empty (and the claim deleted the stale wake tokens), so
every job that becomes claimable from then on pushes a fresh token, and the fetcher blocks on the wake
list (BLPOP, on a connection of its own whose socket timeout outlasts the block; on a cluster, a cluster
client of its own, which sends the BLPOP to the node owning the wake key's slot) until a token arrives,
the next sweep is due, or the next delayed job is due. A block that ends without a token is followed by
the sweep, not by a claim, which is what keeps an idle worker at two commands per block; once per
:data:`SAFETY_CLAIM_S` it claims anyway.

A claim whose answer never came (:class:`~echomq.errors.RedisUnavailable`: a timeout, a cut, a Redis
pause) may have run in Redis: its jobs are then active under this worker's name and nobody's handler.
So the fetcher keeps that claim's request id and asks again with it (after the worker's pause) until an
answer arrives: the retry is answered with the same jobs (see :mod:`echomq.lanes`), which then run
under the try the lost claim spent. A worker that stops with such a claim outstanding asks once more and
releases what it gets (:meth:`Fetcher.recover_lost`).

The sweep runs every ``sweep_every_s`` under a shared lock of a little less than that period, so N
workers on one bus reclaim about once per period; it also runs as soon as a delayed job is due, which
promotes it (promotion is not locked), and the fetcher then claims.

Punctuality: the fetcher keeps the earliest due time it knows of, and never blocks past it. Every claim
and every sweep reply names the earliest delayed job left (``next_due``) with the server's clock at that
moment, so the due time is placed on the local monotonic clock by that offset (worker clocks never
decide anything; a reply's transit only makes the wake-up later, by that transit); a retry this worker
scheduled itself (a failure with backoff) counts too. So a delayed job or a retry starts within about a
round trip of its due time when a worker is idle, not at the next sweep. Each reply replaces what the
fetcher knew (it read the delayed set whole), so a job promoted by another process is not waited for.

Wake-ups: a claim that comes back full (the lanes may hold more) claims again at once; every job moved to
a lane pushes a wake token (up to the bus's wake cap), and a claim that leaves jobs behind passes one on,
so the idle workers that the moved jobs can use all wake.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Iterable
from typing import Any

from redis.asyncio import RedisCluster

from echomq._clients import async_twin, node_twin
from echomq.bus import Bus
from echomq.errors import translate_redis_errors
from echomq.jobs import Claim
from echomq.lanes import Claimed, new_request
from echomq.worker import faults
from echomq.worker.logs import emit

log = logging.getLogger("echomq.worker")

# How long one BLPOP on the wake list lasts when idle. An enqueue wakes a blocked worker at once through
# its wake token, so this value costs no pickup latency: it only sets how often an idle worker speaks to
# Redis. 10 s, on the same timer as a 10 s sweep, keeps an idle worker at one BLPOP and one sweep per
# 10 s (the budget is in echomq.worker); a shorter block buys nothing but commands, a longer one would
# only stretch the sweep period it is tied to.
IDLE_BLOCK_S = 10.0
# An idle worker claims once this often even without a wake token, so a token lost with a dropped
# connection (popped by a BLPOP whose client died) delays a queued job by at most this long.
SAFETY_CLAIM_S = 60.0
_SLACK_S = 0.02  # a timer this close to due counts as due, so a BLPOP ending on time is not split in two
_SOCKET_MARGIN_S = 5.0  # the pickup connection's socket timeout exceeds the longest block by this much


async def first_of(awaitables: Iterable[Awaitable[Any]], within_s: float | None) -> None:
    """Wait until one of ``awaitables`` is done or ``within_s`` passes; cancel the unfinished ones."""
    futures = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(futures, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()
                # A cancelled call may still end in an error of its own (a BLPOP whose connection the
                # stopping worker closes meanwhile: "Connection closed by server"); nobody waits for it,
                # so it is retrieved here rather than logged as "never retrieved" when collected.
                future.add_done_callback(_retrieved)


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class Fetcher:
    """Claims for one worker, blocks when there is nothing to claim, sweeps on its timer."""

    def __init__(
        self, bus: Bus, *, lease_ms: int, owner: str, sweep_every_s: float, stopping: asyncio.Event
    ) -> None:
        self.bus = bus
        self.lease_ms = lease_ms
        self.owner = owner
        self.sweep_every_s = sweep_every_s
        # A little less than the period, so this worker's own next sweep never finds its own lock held.
        self.sweep_lock_ms = max(1, int(sweep_every_s * 900))
        self._stopping = stopping
        self._waker: Bus | None = None
        self._need_claim = True
        self._next_sweep_at = 0.0  # monotonic; 0 = sweep at once (a predecessor's jobs come back early)
        self._due_at: float | None = None  # monotonic time the next delayed job is due
        self._next_safety_claim_at = 0.0
        self._lost: tuple[str, int] | None = None  # a claim with no answer yet: (request id, count)

    def open(self) -> None:
        """Make the pickup connection (it connects on first use; on a cluster, at the first block)."""
        if self._waker is None and not self.bus.is_cluster:
            client = async_twin(self.bus.redis, socket_timeout=IDLE_BLOCK_S + _SOCKET_MARGIN_S)
            self._waker = Bus(client, self.bus.tag, self.bus.settings)

    async def _pickup(self) -> Bus | None:
        """The bus to block on: on a cluster, a plain client to the node owning the wake key's slot."""
        if self._waker is None and isinstance(self.bus.redis, RedisCluster):
            with translate_redis_errors():
                client = await node_twin(
                    self.bus.redis, self.bus.keys.wake, socket_timeout=IDLE_BLOCK_S + _SOCKET_MARGIN_S
                )
            self._waker = Bus(client, self.bus.tag, self.bus.settings)
        return self._waker

    async def aclose(self) -> None:
        if self._waker is not None:
            await self._waker.aclose()
            self._waker = None

    @property
    def claim_unanswered(self) -> bool:
        """A claim's answer never came: its jobs are active under its request, its record lives a lease."""
        return self._lost is not None

    def want_claim(self) -> None:
        """Claim at the next :meth:`fetch` without blocking first (a slot freed, or an error passed)."""
        self._need_claim = True

    def due_in(self, delay_s: float) -> None:
        """A job becomes due ``delay_s`` from now (a retry this worker scheduled): wake for it then."""
        self._learn_due(time.monotonic() + max(0.0, delay_s), replace=False)

    def _learn_due(self, at: float | None, *, replace: bool) -> None:
        """Keep ``at`` as the next due time: as the whole truth (``replace``, from a claim or sweep reply,
        which read the delayed set's head), or as one more job due then (the earlier of the two)."""
        if replace or self._due_at is None:
            self._due_at = at
        elif at is not None:
            self._due_at = min(self._due_at, at)

    def _from_server(self, due_ms: int | None, server_ms: int) -> float | None:
        """``due_ms`` (server clock) on the monotonic clock, by the reply's server time ``server_ms``."""
        return None if due_ms is None else time.monotonic() + max(0, due_ms - server_ms) / 1000

    def until_timer(self) -> float:
        """Seconds until the next sweep or the next delayed job is due."""
        at = self._next_sweep_at if self._due_at is None else min(self._next_sweep_at, self._due_at)
        return max(0.0, at - time.monotonic())

    async def fetch(self, free: int) -> list[Claim]:
        """Up to ``free`` claimed jobs; ``[]`` after a block that found none. Sweeps first when due,
        unless a claim is unanswered: that claim is asked again first (see :meth:`_claim`)."""
        retry = self._lost is not None
        if not retry:
            await self.sweep_if_due()
        if retry or self._need_claim or time.monotonic() >= self._next_safety_claim_at:
            # Free slots only grow while no claim is answered, so a retry's jobs fit the slots.
            claimed = await self._claim(*(self._lost or (new_request(), free)))
            if claimed.jobs:
                faults.at("worker.after_claim")
            self._next_safety_claim_at = time.monotonic() + SAFETY_CLAIM_S
            self._note_due(claimed)
            # A full batch: the lanes may hold more. A short one: the ring emptied, so block next time;
            # but a retry answers with what the lost claim got, which says nothing about the lanes now.
            self._need_claim = retry or len(claimed.jobs) == free
            if claimed.jobs:
                return claimed.jobs
        self._need_claim = await self._block()
        return []

    async def _claim(self, request: str, count: int) -> Claimed:
        """Claim under ``request``; until an answer arrives, the request is kept for the retry.

        The retry goes before any sweep: it alone renews the lost claim's leases (nobody tracks those
        jobs yet), and a sweep in front of it, due at every try when Redis fails for longer than the
        sweep period, would fail in its place (so the retry were never sent) or, once it lands after
        the leases ran out, reap the jobs unrun (dead on their last try)."""
        self._lost = (request, count)
        claimed = await self.bus.claim_batch(
            count=count, lease_ms=self.lease_ms, owner=self.owner, request=request
        )
        self._lost = None
        return claimed

    async def recover_lost(self) -> list[Claim]:
        """The jobs of a claim whose answer never came, asked for again (for the worker to release at
        stop); ``[]`` when every claim was answered. Raises :class:`~echomq.errors.RedisUnavailable`."""
        if self._lost is None:
            return []
        return (await self._claim(*self._lost)).jobs

    async def sweep_if_due(self) -> None:
        now = time.monotonic()
        due = self._due_at is not None and now + _SLACK_S >= self._due_at
        timer = now + _SLACK_S >= self._next_sweep_at
        if due or timer:
            moved = await self._sweep("timer" if timer else "due")
            self._need_claim = self._need_claim or moved or due

    async def _block(self) -> bool:
        """Block on the wake list until a token (True), a timer or stop (False)."""
        timeout = min(IDLE_BLOCK_S, self.until_timer())
        if timeout <= _SLACK_S:  # too short to block on Redis for: wait it out here, then the timer is due
            await first_of([self._stopping.wait()], timeout)
            return False
        waker = await self._pickup()
        if waker is None:
            return False
        pickup = asyncio.ensure_future(waker.wait_for_work(timeout))
        await first_of([pickup, self._stopping.wait()], None)
        if not pickup.done():  # stopping: the BLPOP was cancelled (its connection is dropped)
            return False
        if pickup.exception() is not None and self.bus.is_cluster:
            await self.aclose()  # the slot may have moved: ask again which node owns it next time
        return pickup.result()

    async def _sweep(self, reason: str) -> bool:
        """Run the sweep (``reason``: its timer, or a delayed job due); True if it moved jobs to lanes."""
        report = await self.bus.sweep(lock_ms=self.sweep_lock_ms)
        self._next_sweep_at = time.monotonic() + self.sweep_every_s
        self._learn_due(self._from_server(report.next_due_ms, report.server_ms), replace=True)
        level = logging.INFO if report.reclaimed or report.dead else logging.DEBUG
        emit(
            log,
            level,
            "worker.swept",
            reason=reason,
            promoted=report.promoted,
            reclaimed=report.reclaimed,
            dead=report.dead,
            trimmed=report.trimmed,
            locked_out=not report.swept,
        )
        return report.promoted > 0 or report.reclaimed > 0

    def _note_due(self, claimed: Claimed) -> None:
        self._learn_due(self._from_server(claimed.next_due_ms, claimed.server_ms), replace=True)
