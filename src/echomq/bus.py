"""The Bus: one tag's keyspace, its scripts and settings, bound to an asyncio Redis client.

A thin facade on :class:`~echomq.core.BusCore`: each method delegates to the module that provides the
behaviour and documents its guarantee (:mod:`echomq.jobs`, :mod:`echomq.finish`, :mod:`echomq.lanes`,
:mod:`echomq.sweep`, :mod:`echomq.dead`, :mod:`echomq.stats`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from redis.asyncio import Redis

from echomq import control, dead, events, finish, flow, inspection, jobs, lanes, results, stats, sweep
from echomq import effects as effects_module
from echomq._clients import ClusterClient, client_options
from echomq._validate import check_int
from echomq.core import DEFAULT_TAG, BusCore, Settings
from echomq.dead import DeadDeletion, DeadRetry
from echomq.effects import Effects
from echomq.errors import translate_redis_errors
from echomq.flow import FlowSettings, Rate
from echomq.inspection import JobInfo
from echomq.jobs import Claim, NewJob
from echomq.lanes import Claimed
from echomq.states import Admission, Control, Deletion, Failure, Finish, Lease, Release
from echomq.stats import Stats
from echomq.sweep import SweepReport


class Bus(BusCore):
    """A reliable queue on ``redis`` under the tag ``tag`` (keys ``emq:{tag}:...``).

    ``redis`` is a ``redis.asyncio.Redis`` or a ``redis.asyncio.RedisCluster``, created with
    ``decode_responses=False``. On a cluster every key of the bus is in the one slot of its hash tag, so
    every script runs on the node that owns it; a large deployment spreads lanes over several tags.
    Batched calls (:meth:`enqueue_many`, and the :class:`~echomq.worker.runner.Worker`'s completes and lease
    renewals) go one script per call on a cluster, since redis-py's cluster pipeline refuses scripts.
    On a plain client the scripts run over one connection of the bus's own, besides the client's pool,
    whenever it is free (:mod:`echomq._wire`); :meth:`aclose` closes it with the client. A blocking
    producer (a web view, a script) uses :class:`echomq.SyncBus` instead.
    """

    @classmethod
    def from_url(
        cls,
        url: str,
        tag: str = DEFAULT_TAG,
        settings: Settings | None = None,
        *,
        cluster: bool = False,
        max_connections: int | None = None,
    ) -> Bus:
        """A bus on a new client for ``url`` (``redis://``, ``rediss://`` or ``unix://``); with
        ``cluster=True`` a cluster client that discovers the other nodes from that one.

        ``max_connections`` sizes the client's pool (per node on a cluster; redis-py's default is 100,
        and a call past it fails at once rather than waiting): give at least the number of concurrent
        callers, e.g. a worker's concurrency when its handler uses Redis too. The bus's own connection for
        its scripts comes on top."""
        options = client_options(max_connections)
        if cluster:
            return cls(ClusterClient.from_url(url, **options), tag, settings)
        return cls(Redis.from_url(url, **options), tag, settings)

    def route(self, lane: str) -> Bus:
        """The bus that holds ``lane``: this one (a :class:`~echomq.partitions.PartitionedBus` picks
        the lane's partition), so code written for either kind finds a claim's bus the same way."""
        return self

    async def check_layout(self) -> None:
        """Nothing to check on one bus (a :class:`~echomq.partitions.PartitionedBus` checks its P)."""

    async def enqueue(
        self,
        job: str,
        *,
        lane: str,
        payload: bytes,
        max_attempts: int = 5,
        priority: int = 0,
        delay_ms: int = 0,
    ) -> Admission:
        return await jobs.enqueue(
            self,
            job,
            lane=lane,
            payload=payload,
            max_attempts=max_attempts,
            priority=priority,
            delay_ms=delay_ms,
        )

    async def enqueue_many(self, new_jobs: Iterable[NewJob]) -> list[Admission]:
        return await jobs.enqueue_many(self, new_jobs)

    async def claim(
        self, count: int = 1, lease_ms: int = 30_000, owner: str = "", request: str | None = None
    ) -> list[Claim]:
        return (await lanes.claim(self, count, lease_ms, owner, request)).jobs

    async def claim_batch(
        self, count: int = 1, lease_ms: int = 30_000, owner: str = "", request: str | None = None
    ) -> Claimed:
        return await lanes.claim(self, count, lease_ms, owner, request)

    async def complete(self, claim: Claim, result: bytes = b"", *, effects: Effects | None = None) -> Finish:
        """Complete ``claim`` (:func:`echomq.finish.complete`); with ``effects``, apply them in the same
        atomic step, or none of them if the claim is stale (:mod:`echomq.effects`)."""
        if effects is None:
            return await finish.complete(self, claim, result)
        return await effects_module.complete(self, claim, result, effects)

    async def fail(
        self, claim: Claim, error: str, *, retryable: bool = True, delay_ms: int | None = None
    ) -> Failure:
        return await finish.fail(self, claim, error, retryable=retryable, delay_ms=delay_ms)

    async def extend(self, claim: Claim, lease_ms: int) -> Lease:
        return await finish.extend(self, claim, lease_ms)

    async def release(self, claim: Claim) -> Release:
        return await finish.release(self, claim)

    async def retry_dead(self, job: str) -> bool:
        return await dead.retry_dead(self, job)

    async def retry_all_dead(self, *, batch: int = dead.DEFAULT_BATCH) -> DeadRetry:
        """Retry each job of a snapshot of the dead set once; the report names the jobs moved."""
        return await dead.retry_all_dead(self, batch=batch)

    async def delete_dead(self, job: str) -> Deletion:
        """Delete a dead letter, leaving its tombstone for the dedup window (:mod:`echomq.dead`)."""
        return await dead.delete_dead(self, job)

    async def delete_all_dead(self, *, batch: int = dead.DEFAULT_BATCH) -> DeadDeletion:
        """Delete each job of a snapshot of the dead set; the report names the jobs deleted."""
        return await dead.delete_all_dead(self, batch=batch)

    async def result(self, job: str, *, timeout: float) -> bytes:  # noqa: ASYNC109 (the API users know)
        """Wait up to ``timeout`` s for ``job``'s result, without polling (:mod:`echomq.results`)."""
        return await results.result(self, job, timeout=timeout)

    async def cancel(self, job: str, reason: str = "") -> Control:
        """Cancel a queued or delayed job (:mod:`echomq.control`)."""
        return await control.cancel(self, job, reason)

    async def revoke(self, job: str, reason: str = "") -> Control:
        """Take an active job from its worker: dead-lettered, its finish refused (:mod:`echomq.control`)."""
        return await control.revoke(self, job, reason)

    async def pause(self, lane: str | None = None) -> None:
        """Pause the bus (no claims), or one lane (out of the rotation) (:mod:`echomq.flow`)."""
        await flow.run(self, flow.pause_call(self.keys, self.settings.wake_cap, lane, resume=False))

    async def resume(self, lane: str | None = None) -> None:
        """Resume the bus, or one lane, and wake the idle workers (:mod:`echomq.flow`)."""
        await flow.run(self, flow.pause_call(self.keys, self.settings.wake_cap, lane, resume=True))

    async def set_lane_cap(self, lane: str, cap: int | None) -> None:
        """At most ``cap`` active jobs of ``lane`` (``"*"``: every lane without its own; None clears)."""
        await flow.run(self, flow.cap_call(self.keys, self.settings.wake_cap, lane, cap))

    async def set_rate_limit(self, rate: Rate | None, *, lane: str | None = None) -> None:
        """At most ``rate.count`` claims in any ``rate.per_ms`` window, of the bus (``lane=None``), one
        lane, or every lane without its own (``"*"``); None clears it (:mod:`echomq.flow`)."""
        await flow.run(self, flow.rate_call(self.keys, self.settings.wake_cap, lane, rate))

    async def set_events(self, maxlen: int | None) -> None:
        """Turn the lifecycle events on, about ``maxlen`` entries kept, or off (:mod:`echomq.events`)."""
        await events.set_events(self, maxlen)

    def events(self, *, since: str = "0", follow: bool = False) -> AsyncIterator[events.Event]:
        """The lifecycle and progress events after ``since`` (:mod:`echomq.events`)."""
        return events.events(self, since=since, follow=follow)

    async def progress(self, claim: Claim, text: str) -> bool:
        """Publish a progress event for the job ``claim`` holds (fenced; :mod:`echomq.events`)."""
        return await events.progress(self, claim, text)

    async def flow_settings(self) -> FlowSettings:
        """The pauses, caps and rates set on this bus."""
        return await flow.read_flow(self)

    async def inspect(self, job: str) -> JobInfo:
        return await inspection.inspect(self, job)

    async def sweep(self, *, lock_ms: int = 0, limit: int = sweep.DEFAULT_LIMIT) -> SweepReport:
        return await sweep.sweep(self, lock_ms=lock_ms, limit=limit)

    async def wait_for_work(self, timeout_s: float) -> bool:
        return await lanes.wait_for_work(self, timeout_s)

    async def stats(self, *, lanes: int = 50) -> Stats:
        return await stats.read_stats(self, lanes=lanes)

    async def dead_jobs(self, limit: int = 100) -> list[tuple[str, int]]:
        """The oldest ``limit`` dead-lettered ids with their time (server ms)."""
        check_int("limit", limit, 1, 100_000)
        with translate_redis_errors():
            rows: list[tuple[bytes, float]] = await self.redis.zrange(  # type: ignore[assignment]
                self.keys.dead, 0, limit - 1, withscores=True
            )
        return [(job.decode(), int(score)) for job, score in rows]

    async def aclose(self) -> None:
        if self.durable is not None:
            await self.durable.aclose()
        if self.wire is not None:
            await self.wire.release()
        await self.redis.aclose()

    async def __aenter__(self) -> Bus:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
