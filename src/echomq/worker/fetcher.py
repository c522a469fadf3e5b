"""The fetcher: when a worker claims, when it blocks on the wake list, and when it sweeps.

Blocking happens outside Lua, claiming inside it. The fetcher claims a batch for the worker's free slots;
when the claim comes back short, the ring was empty (and the claim deleted the stale wake tokens), so
every job that becomes claimable from then on pushes a fresh token, and the fetcher blocks on the wake
list with its next claim already sent behind the BLPOP (:mod:`echomq.worker.pickup`): Redis runs that
claim the moment a token arrives, so pickup costs no round trip after the wake-up. The block lasts until
a token arrives or the next sweep is due, at most :data:`IDLE_CAP_S`; the claim runs at its end either
way.

When to sweep: never on a fixed period. Every sweep reply names when each of its steps is next due (the
earliest delayed job, the earliest lease deadline, the oldest finished row's end of retention) and every
claim reply the next delayed job; an empty claim also the earliest lease deadline. The fetcher sweeps

* at the earliest due time of a delayed job it knows of (punctuality, below);
* at the earliest lease deadline it knows of, or when the oldest done or dead row passes its ttl, but
  no sooner than ``sweep_every_s`` after its previous sweep (so a busy bus is swept about as often as
  ever, and a burst of deadlines or trims costs one sweep per period);
* once per :data:`IDLE_CAP_S` in any case.

So nothing active, nothing delayed and nothing to trim means nothing to sweep: an idle worker sends one
BLPOP, one claim and one sweep per :data:`IDLE_CAP_S`, 1 + 9 + 7 = 17 commands counting those the
scripts run (an empty claim runs eight, a sweep with nothing due six), about 1.7 a minute, within
:data:`~echomq.worker.runner.IDLE_COMMANDS_PER_MIN`.

Watching leases: a worker learns the earliest lease deadline from its own claims (its jobs' deadlines),
from its empty claims and from its sweeps, and keeps sweeping at it until a sweep finds ``active``
empty. A claim that makes ``active`` non-empty and leaves the ring empty leaves one wake token
(claim.lua, "Watch"), so one idle worker wakes, claims nothing and learns the deadline. So a job whose
worker died (SIGKILL, OOM, host loss) is claimable again within the longest lease on the bus plus
``sweep_every_s`` (plus a round trip) after its last renewal, whenever another worker runs, idle or
busy; in every case within that lease plus :data:`IDLE_CAP_S`. Likewise for trims: a worker that claims
jobs sweeps once the result ttl has passed since (none of its rows can be due sooner), and that sweep
names the next trim time, so the rows of the last jobs are trimmed on time when the bus goes idle, with
no finish left to trim them.

A claim whose answer never came (:class:`~echomq.errors.RedisUnavailable`: a timeout, a cut, a Redis
pause; or a block's pipelined claim whose connection failed) may have run in Redis: its jobs are then
active under this worker's name and nobody's handler. So the fetcher keeps that claim's request id and
asks again with it (after the worker's pause) until an answer arrives: the retry is answered with the
same jobs (see :mod:`echomq.lanes`), which then run under the try the lost claim spent. A worker that
stops with such a claim outstanding asks once more and releases what it gets
(:meth:`Fetcher.recover_lost`); a block that stop cancelled is asked about only if its claim left a
record (an empty claim leaves none and holds nothing).

A lost wake token: a token is popped only by a BLPOP whose claim Redis runs right after it, so a token
is not lost with a dropped connection; its claim's reply is (its jobs wait out their lease, then the
sweep of a watching worker returns them, as above). A token popped some other way (an older worker, a
client of another kind) delays a queued job by at most :data:`IDLE_CAP_S`: every block ends in a claim.
A worker frozen while it blocks (SIGSTOP, a stalled host) still has its claim waiting in Redis: the next
job to arrive is claimed by it and waits out its lease before the sweep hands it to another worker, as
if the worker had frozen just after claiming it (one claim's batch at most, then nothing more).
A block has no socket timeout (it lasts up to :data:`IDLE_CAP_S`), so its connection keeps TCP keepalive
on unless the application set its own (``echomq._clients``): a link that dies silently, dropping packets
with no reset, is found within about a minute, the block fails and the worker connects and claims again.

Punctuality: the fetcher keeps the earliest due time it knows of, and never blocks past it. Every claim
and every sweep reply names the earliest delayed job left (``next_due``) with the server's clock at that
moment, so the due time is placed on the local monotonic clock by that offset (worker clocks never
decide anything; a reply's transit only makes the wake-up later, by that transit); a retry this worker
scheduled itself (a failure with backoff) counts too. A delayed enqueue or a retry pushes a wake token,
so an idle worker learns a new earliest due time from the claim it wakes to. So a delayed job or a
retry starts within about a round trip of its due time when a worker is idle. Each reply replaces what
the fetcher knew (it read the delayed set whole), so a job promoted by another process is not waited for.

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

from echomq.bus import Bus
from echomq.errors import translate_redis_errors
from echomq.jobs import Claim
from echomq.lanes import Claimed, claim_call, claimed_from_reply, new_request
from echomq.worker import faults
from echomq.worker.logs import emit
from echomq.worker.pickup import NOSCRIPT, Pickup

log = logging.getLogger("echomq.worker")

# The longest an idle worker goes without a sweep and a claim. An enqueue wakes a blocked worker at once
# through its wake token and every due time it knows of ends a block sooner, so this value costs no
# pickup latency: it bounds only what no reply can tell (a token popped by another kind of client, a
# watching worker that died), and sets the idle cost (17 commands per cap, see the module doc).
IDLE_CAP_S = 600.0
_SLACK_S = 0.02  # a timer this close to due counts as due, so a BLPOP ending on time is not split in two
_PAST_S = 0.05  # a lease deadline or a trim time is swept this long after it, when it has surely passed


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


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


class Fetcher:
    """Claims for one worker, blocks when there is nothing to claim, sweeps when a step is due."""

    def __init__(
        self, bus: Bus, *, lease_ms: int, owner: str, sweep_every_s: float, stopping: asyncio.Event
    ) -> None:
        self.bus = bus
        self.lease_ms = lease_ms
        self.owner = owner
        self.sweep_every_s = sweep_every_s
        self.idle_cap_s = IDLE_CAP_S
        self._stopping = stopping
        self.pickup = Pickup(bus)
        self._stop_watch: asyncio.Future[Any] | None = None
        self._blocked: asyncio.Future[Any] | None = None
        self._need_claim = True
        self._swept_at: float | None = None  # monotonic; None = sweep at once (a predecessor's jobs)
        self._due_at: float | None = None  # monotonic time the next delayed job is due
        self._lease_at: float | None = None  # ... the earliest lease deadline known passes
        self._trim_at: float | None = None  # ... the oldest finished row passes its ttl
        self._lost: tuple[str, int] | None = None  # a claim with no answer yet: (request id, count)
        self._lost_in_block = False  # that claim was sent behind a BLPOP (it ran only if a block ended)

    def open(self) -> None:
        """Start watching for stop (it cancels a block); the pickup connects at the first block."""
        if self._stop_watch is None:
            self._stop_watch = asyncio.ensure_future(self._stopping.wait())
            self._stop_watch.add_done_callback(self._on_stop)

    def _on_stop(self, _: asyncio.Future[Any]) -> None:
        if self._blocked is not None:
            self._blocked.cancel()

    async def aclose(self) -> None:
        if self._stop_watch is not None:
            self._stop_watch.remove_done_callback(self._on_stop)
            self._stop_watch.cancel()
            self._stop_watch = None
        await self.pickup.aclose()

    @property
    def claim_unanswered(self) -> bool:
        """A claim's answer never came: its jobs are active under its request, its record lives a lease."""
        return self._lost is not None

    def want_claim(self) -> None:
        """Claim at the next :meth:`fetch` without blocking first (a slot freed, or an error passed)."""
        self._need_claim = True

    def due_in(self, delay_s: float, lane: str | None = None) -> None:
        """A job becomes due ``delay_s`` from now (a retry this worker scheduled on ``lane``): wake for
        it then."""
        self._due_at = _earliest(self._due_at, time.monotonic() + max(0.0, delay_s))

    def _local(self, at_ms: int | None, server_ms: int, after_s: float = 0.0) -> float | None:
        """``at_ms`` (server clock) on the monotonic clock, by the reply's server time ``server_ms``;
        ``after_s`` later when it is still ahead (a time already past is now: never put off again)."""
        if at_ms is None:
            return None
        now = time.monotonic()
        return now if at_ms < server_ms else now + (at_ms - server_ms) / 1000 + after_s

    def next_sweep_at(self) -> float:
        """The monotonic time of the next sweep (see the module doc)."""
        if self._swept_at is None:
            return 0.0
        at = self._swept_at + self.idle_cap_s
        soon = _earliest(self._lease_at, self._trim_at)
        if soon is not None:
            at = min(at, max(soon, self._swept_at + self.sweep_every_s))
        return at if self._due_at is None else min(at, self._due_at)

    def until_timer(self) -> float:
        """Seconds until the next sweep is due."""
        return max(0.0, self.next_sweep_at() - time.monotonic())

    async def fetch(self, free: int) -> list[Claim]:
        """Up to ``free`` claimed jobs; ``[]`` after a block that claimed none. Sweeps first when due,
        unless a claim is unanswered: that claim is asked again first (see :meth:`_claim`)."""
        jobs = await self.claim_step(free)
        if jobs:
            return jobs
        woke = await self._block(free)
        if woke is None:
            return []
        self._need_claim = len(woke.jobs) == free
        if woke.jobs:
            faults.at("worker.after_claim")
        return woke.jobs

    async def claim_step(self, free: int) -> list[Claim]:
        """The part of :meth:`fetch` before a block: sweep when due (unless a claim is unanswered), then
        claim up to ``free`` when a claim is wanted (asking an unanswered claim again first); ``[]`` when
        no claim was sent or it came back empty."""
        retry = self._lost is not None
        if not retry:
            await self.sweep_if_due()
        if not (retry or self._need_claim):
            return []
        # Free slots only grow while no claim is answered, so a retry's jobs fit the slots.
        claimed = await self._claim(*(self._lost or (new_request(), free)))
        # A full batch: the lanes may hold more. A short one: the ring emptied, so block next time;
        # but a retry answers with what the lost claim got, which says nothing about the lanes now.
        self._need_claim = retry or len(claimed.jobs) == free
        if claimed.jobs:
            faults.at("worker.after_claim")
        return claimed.jobs

    async def _claim(self, request: str, count: int) -> Claimed:
        """Claim under ``request``; until an answer arrives, the request is kept for the retry.

        The retry goes before any sweep: it alone renews the lost claim's leases (nobody tracks those
        jobs yet), and a sweep in front of it, due at every try when Redis fails for longer than the
        sweep period, would fail in its place (so the retry were never sent) or, once it lands after
        the leases ran out, reap the jobs unrun (dead on their last try)."""
        self._lost, self._lost_in_block = (request, count), False
        claimed = await self.bus.claim_batch(
            count=count, lease_ms=self.lease_ms, owner=self.owner, request=request
        )
        self._lost = None
        self._claimed(claimed)
        return claimed

    def _claimed(self, claimed: Claimed) -> None:
        """Learn from a claim's answer: the next due time, and the leases to watch."""
        self._due_at = self._local(claimed.next_due_ms, claimed.server_ms)
        if claimed.leases_read:
            self._lease_at = self._local(claimed.next_lease_ms, claimed.server_ms, _PAST_S)
        elif claimed.jobs:  # this worker's own leases: it watches them too, and the rows they leave
            first = min(claim.deadline_ms for claim in claimed.jobs)
            self._lease_at = _earliest(self._lease_at, self._local(first, claimed.server_ms, _PAST_S))
            ttl_s = self.bus.settings.result_ttl_ms / 1000  # none of them is done sooner than now
            self._trim_at = _earliest(self._trim_at, time.monotonic() + ttl_s + _PAST_S)

    async def recover_lost(self) -> list[Claim]:
        """The jobs of a claim whose answer never came (for the worker to release at stop); ``[]`` when
        every claim was answered. Raises :class:`~echomq.errors.RedisUnavailable`."""
        if self._lost is None:
            return []
        if self._lost_in_block:  # a block that stop cancelled: its claim kept a record if it took any
            with translate_redis_errors():
                exists = await self.bus.redis.exists(self.bus.keys.claim_record(self._lost[0]))
            if not exists:
                self._lost = None
                return []
        return (await self._claim(*self._lost)).jobs

    async def sweep_if_due(self) -> None:
        now = time.monotonic()
        if now + _SLACK_S < self.next_sweep_at():
            return
        due = self._due_at is not None and now + _SLACK_S >= self._due_at
        moved = await self._sweep("due" if due else self._reason(now))
        self._need_claim = self._need_claim or moved or due

    def _reason(self, now: float) -> str:
        if self._swept_at is None:
            return "start"
        soon = _earliest(self._lease_at, self._trim_at)
        if soon is not None and now + _SLACK_S >= soon:
            return "lease" if soon == self._lease_at else "trim"
        return "idle"

    async def _block(self, free: int) -> Claimed | None:
        """Block on the wake list with a claim behind it, until a token, the next sweep or stop; the
        claim's answer, or None when nothing was claimed for certain (stop, or a timer too near)."""
        await asyncio.sleep(0)  # the handlers of the jobs just claimed start before this block is sent
        timeout = min(self.idle_cap_s, self.until_timer())
        if timeout <= _SLACK_S or self._stopping.is_set():  # too short to block on Redis for: wait here
            await first_of([self._stopping.wait()], timeout)
            return None
        # From the check above to the task below nothing awaits: a stop after it cancels the block.
        request = new_request()
        keys, args = claim_call(self.bus, free, self.lease_ms, self.owner, request)
        self._lost, self._lost_in_block = (request, free), True
        self._blocked = asyncio.ensure_future(self.pickup.wait_and_claim(timeout, keys, args))
        try:
            reply = await self._blocked
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._blocked.cancelled() and task is not None and not task.cancelling():
                return None  # stopping: recover_lost asks whether that claim ran
            raise
        finally:
            self._blocked = None
        if reply is NOSCRIPT:  # the claim did not run: claim at once, the script loaded by the bus
            self._lost = None
            self._need_claim = True
            return None
        self._lost = None
        claimed = claimed_from_reply(reply, request)
        self._claimed(claimed)
        return claimed

    async def _sweep(self, reason: str) -> bool:
        """Run the sweep (``reason``: what was due); True if it moved jobs to lanes."""
        report = await self.bus.sweep()
        self._swept_at = time.monotonic()
        self._due_at = self._local(report.next_due_ms, report.server_ms)
        stuck = report.next_due_ms is not None and report.next_due_ms <= report.server_ms
        if stuck and not report.promoted:  # due but not promotable now (its slot moving): not at once
            self._due_at = self._swept_at + self.sweep_every_s
        self._lease_at = self._local(report.next_lease_ms, report.server_ms, _PAST_S)
        self._trim_at = self._local(report.next_trim_ms, report.server_ms, _PAST_S)
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
        )
        return report.promoted > 0 or report.reclaimed > 0
