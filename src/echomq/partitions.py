"""One logical queue over P partitions: P buses (tags ``<tag>.0`` ... ``<tag>.<P-1>``) on one client.

On a Redis Cluster each tag is a slot of its own, so the partitions spread over the masters while every
script still runs whole in one slot: a lane belongs to the partition :func:`partition_of` its name (a
stable hash, the same in every process and every release), so a job, its lane and everything a script
touches with it stay in one partition. Every guarantee of :class:`~echomq.bus.Bus` holds per partition,
and so for the whole queue: admission, the fenced finishes and the sweep are a partition's scripts, and a
job never leaves its partition.

**A job id is deduplicated within its lane's partition.** On one bus a second enqueue of an id under
another lane is ``CONFLICT``; here two lanes of different partitions are two buses, each of which admits
the id (an index of every id across slots cannot be kept atomically with the admission). Mint a fresh id
per job, and keep an id's lane fixed (a retry with the same lane is ``DUPLICATE`` as on one bus): the
game does, since a guess's lane is its player's id, fixed by authentication.

Calls route by lane (enqueue, the finishing calls: a :class:`~echomq.jobs.Claim` carries its lane) or go
to every partition (sweep, stats, dead letters: their answers merged). A call by job id alone
(:meth:`PartitionedBus.inspect`, :meth:`PartitionedBus.retry_dead`) asks the partitions in turn, since an
id does not name its lane.

Claims rotate across partitions (:meth:`PartitionedBus.claim_batch`): each call starts at the next
partition and takes what it can there before going on, so every non-empty partition is visited at least
once in every P consecutive calls of one claimant. Within a partition the ring serves its lanes in turn
(:mod:`echomq.lanes`). Fairness bound: a lane that becomes non-empty in partition p, behind ``W_p`` lanes
already waiting there, is served within ``P * (W_p + c)`` jobs claimed by one claimant claiming ``c`` at a
time (each visit to p serves c lanes of its ring; between two visits the other partitions give at most
``(P - 1) * c``). With lanes hashed evenly ``W_p`` is about ``W / P`` for ``W`` waiting lanes in all, so
about ``W + P * c``. ``tests/integration/test_partitions.py`` checks the bound.

Growing P: a partitioned bus keeps its P for its life (a lane's partition is a function of P). To grow,
start a new bus with the larger P under a new tag and send new work there while workers serve both until
the old one drains; the game opens each new round with the P configured at its opening.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import zlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from redis.asyncio import Redis, RedisCluster

from echomq._clients import ClusterClient, client_options
from echomq._validate import check_int
from echomq.bus import Bus
from echomq.core import DEFAULT_TAG, Settings
from echomq.dead import DeadDeletion, DeadRetry
from echomq.effects import Effects
from echomq.errors import InvalidOption, UnknownJob
from echomq.inspection import JobInfo
from echomq.jobs import Claim, NewJob, enqueue_call, pool_size
from echomq.keyspace import check_request, check_tag
from echomq.lanes import Claimed, new_request
from echomq.partition_control import PartitionControl
from echomq.partition_layout import (
    MAX_PARTITIONS,
    MAX_REQUEST,
    check_layout,
    gated,
    merge_stats,
    merged_gate,
    partition_of,
    partition_tags,
    recorded,
)
from echomq.states import Admission, Deletion, Failure, Finish, Lease, Release
from echomq.stats import Stats
from echomq.sweep import SweepReport

__all__ = ["MAX_PARTITIONS", "AnyBus", "PartitionedBus", "partition_of", "partition_tags"]
T = TypeVar("T")


class PartitionedBus(PartitionControl):
    """A reliable queue over ``partitions`` buses of one client (see the module doc).

    ``redis`` is a ``redis.asyncio.RedisCluster`` (the partitions spread over its masters) or a
    ``redis.asyncio.Redis`` (all on one server: the same behaviour, for tests and for growing into a
    cluster later without renaming keys). With ``partitions=1`` it is one bus under the tag ``<tag>.0``.
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        tag: str = DEFAULT_TAG,
        partitions: int = 3,
        settings: Settings | None = None,
    ) -> None:
        self.redis = redis
        self.tag = check_tag(tag)
        self.settings = settings or Settings()
        self.partitions = [Bus(redis, t, self.settings) for t in partition_tags(tag, partitions)]
        self._cursor = 0
        self._layout_checked = False
        self._gate = merged_gate(pool_size(redis))

    @classmethod
    def from_url(
        cls,
        url: str,
        tag: str = DEFAULT_TAG,
        partitions: int = 3,
        settings: Settings | None = None,
        *,
        cluster: bool = False,
        max_connections: int | None = None,
    ) -> PartitionedBus:
        """Like :meth:`echomq.Bus.from_url`, over ``partitions`` tags."""
        options = client_options(max_connections)
        client = ClusterClient.from_url(url, **options) if cluster else Redis.from_url(url, **options)
        return cls(client, tag, partitions, settings)

    @property
    def is_cluster(self) -> bool:
        return isinstance(self.redis, RedisCluster)

    def route(self, lane: str) -> Bus:
        """The partition that holds ``lane`` (raises :class:`~echomq.errors.InvalidLane` on a bad name)."""
        return self.partitions[partition_of(lane, len(self.partitions))]

    # --- producers -----------------------------------------------------------------------------------

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
        """:meth:`echomq.Bus.enqueue` on the lane's partition (a retry lands on the same partition)."""
        await self.check_layout()
        return await self.route(lane).enqueue(
            job, lane=lane, payload=payload, max_attempts=max_attempts, priority=priority, delay_ms=delay_ms
        )

    async def enqueue_many(self, new_jobs: Iterable[NewJob]) -> list[Admission]:
        """:meth:`echomq.Bus.enqueue_many`, one batch per partition (concurrently); answers in order.
        Every job is checked before anything is sent."""
        batch = list(new_jobs)
        groups: dict[int, list[int]] = {}
        for i, new in enumerate(batch):
            groups.setdefault(partition_of(new.lane, len(self.partitions)), []).append(i)
        for p, at in groups.items():  # every job checked before any partition's batch is sent
            for i in at:
                enqueue_call(self.partitions[p], batch[i])
        answers: list[Admission | None] = [None] * len(batch)
        await self.check_layout()
        replies = await gated(
            self._gate,
            [
                functools.partial(self.partitions[p].enqueue_many, [batch[i] for i in at])
                for p, at in groups.items()
            ],
        )
        for at, reply in zip(groups.values(), replies, strict=True):
            for i, admission in zip(at, reply, strict=True):
                answers[i] = admission
        return [a for a in answers if a is not None]

    # --- workers -------------------------------------------------------------------------------------

    async def claim_batch(
        self, count: int = 1, lease_ms: int = 30_000, owner: str = "", request: str | None = None
    ) -> Claimed:
        """Claim up to ``count`` jobs, partitions in rotation (see the module doc).

        Each partition's claim carries the request id ``<request>.<p>``. A given ``request`` is first
        looked up: when a partition holds its claim record, the call is a retry after a lost reply and
        asks only those partitions, each answering what it claimed the first time
        (:func:`echomq.lanes.claim`), claiming nothing new; else it claims from the partition its hash
        names on. The answer's times are those of the last partition asked (each node has its own
        clock)."""
        size = len(self.partitions)
        given = request is not None
        if request is None:
            start, request = self._cursor % size, new_request()
            self._cursor += 1
        else:
            start = zlib.crc32(check_request(request).encode()) % size
        longest = MAX_REQUEST - len(f".{size - 1}")  # each partition's request, checked before any claim
        if len(request) > longest:
            raise InvalidOption(f"a claim request on {size} partitions is at most {longest} characters")
        check_int("count", count, 1)
        await self.check_layout()
        jobs: list[Claim] = []
        answer: Claimed | None = None
        order = [(start + step) % size for step in range(size)]
        if given:  # a retry answers what its first call claimed, and claims nothing new
            replayed = await self._recorded(request, order)
            if replayed:
                for p in replayed:
                    answer = await self.partitions[p].claim_batch(count, lease_ms, owner, f"{request}.{p}")
                    jobs.extend(answer.jobs)
                assert answer is not None
                return Claimed(jobs, answer.server_ms, answer.next_due_ms)
        for step in range(size):
            p = (start + step) % size
            answer = await self.partitions[p].claim_batch(
                count - len(jobs), lease_ms, owner, f"{request}.{p}"
            )
            jobs.extend(answer.jobs)
            if len(jobs) == count:
                break
        assert answer is not None
        return Claimed(jobs, answer.server_ms, answer.next_due_ms)

    async def claim(
        self, count: int = 1, lease_ms: int = 30_000, owner: str = "", request: str | None = None
    ) -> list[Claim]:
        return (await self.claim_batch(count, lease_ms, owner, request)).jobs

    async def complete(self, claim: Claim, result: bytes = b"", *, effects: Effects | None = None) -> Finish:
        return await self.route(claim.lane).complete(claim, result, effects=effects)

    async def fail(
        self, claim: Claim, error: str, *, retryable: bool = True, delay_ms: int | None = None
    ) -> Failure:
        return await self.route(claim.lane).fail(claim, error, retryable=retryable, delay_ms=delay_ms)

    async def extend(self, claim: Claim, lease_ms: int) -> Lease:
        return await self.route(claim.lane).extend(claim, lease_ms)

    async def release(self, claim: Claim) -> Release:
        return await self.route(claim.lane).release(claim)

    async def sweep(self, *, lock_ms: int = 0, limit: int = 1000) -> SweepReport:
        """Sweep every partition; counts summed, the next times the earliest (each on its node's clock)."""
        parts = await self._each(lambda b: b.sweep(lock_ms=lock_ms, limit=limit))

        def first(values: Iterable[int | None]) -> int | None:
            return min((v for v in values if v is not None), default=None)

        return SweepReport(
            promoted=sum(p.promoted for p in parts),
            reclaimed=sum(p.reclaimed for p in parts),
            dead=sum(p.dead for p in parts),
            trimmed=sum(p.trimmed for p in parts),
            next_due_ms=first(p.next_due_ms for p in parts),
            swept=all(p.swept for p in parts),
            server_ms=max(p.server_ms for p in parts),
            next_lease_ms=first(p.next_lease_ms for p in parts),
            next_trim_ms=first(p.next_trim_ms for p in parts),
        )

    # --- operators -----------------------------------------------------------------------------------

    async def inspect(self, job: str) -> JobInfo:
        """The job's state, from the partition that holds it (asked in turn); UnknownJob if none does."""
        for bus in self.partitions:
            try:
                return await bus.inspect(job)
            except UnknownJob:
                continue
        raise UnknownJob(f"no partition of {self.tag} holds {job}")

    async def retry_dead(self, job: str) -> bool:
        """:meth:`echomq.Bus.retry_dead` on the partition that holds the job (asked in turn): False if
        the job is not dead; UnknownJob if no partition holds it."""
        for bus in self.partitions:
            try:
                return await bus.retry_dead(job)
            except UnknownJob:
                continue
        raise UnknownJob(f"no partition of {self.tag} holds {job}")

    async def retry_all_dead(self, *, batch: int = 500) -> DeadRetry:
        parts = await self._each(lambda b: b.retry_all_dead(batch=batch))
        return DeadRetry(sum(p.listed for p in parts), tuple(j for p in parts for j in p.moved))

    async def delete_dead(self, job: str) -> Deletion:
        """:meth:`echomq.Bus.delete_dead` on the partition that holds the job (asked in turn);
        UnknownJob if no partition holds it."""
        for bus in self.partitions:
            try:
                return await bus.delete_dead(job)
            except UnknownJob:
                continue
        raise UnknownJob(f"no partition of {self.tag} holds {job}")

    async def delete_all_dead(self, *, batch: int = 500) -> DeadDeletion:
        parts = await self._each(lambda b: b.delete_all_dead(batch=batch))
        return DeadDeletion(sum(p.listed for p in parts), tuple(j for p in parts for j in p.deleted))

    async def stats(self, *, lanes: int = 50) -> Stats:
        """Every partition's stats merged: counters and depths summed, the deepest ``lanes`` lanes."""
        parts = await self._each(lambda b: b.stats(lanes=lanes))
        return merge_stats(list(parts), lanes)

    async def dead_jobs(self, limit: int = 100) -> list[tuple[str, int]]:
        """The oldest ``limit`` dead-lettered ids of all partitions with their time (a k-way merge)."""
        parts = await self._each(lambda b: b.dead_jobs(limit))
        merged = heapq.merge(*parts, key=lambda row: (row[1], row[0]))
        return [row for _, row in zip(range(limit), merged, strict=False)]

    async def _recorded(self, request: str, order: list[int]) -> list[int]:
        """The partitions (in ``order``) that hold a claim record of ``request``: those its first call
        claimed from (a claim that found nothing records nothing)."""
        return await recorded(self.partitions, request, order, self._gate)

    async def check_layout(self) -> None:
        """Refuse a bus used with another P than it was made with (once per object; a worker checks
        at its start): :func:`echomq.partition_layout.check_layout`."""
        if not self._layout_checked:
            await check_layout(self.partitions, self._gate)
            self._layout_checked = True

    async def _each(self, call: Callable[[Bus], Awaitable[T]]) -> list[T]:
        """``call`` on every partition (:func:`echomq.partition_layout.gated`), in partition order."""
        return await gated(self._gate, [functools.partial(call, bus) for bus in self.partitions])

    async def wait_for_work(self, timeout_s: float) -> bool:
        """Block on every partition's wake list at once; True if a token arrived on any."""
        tasks = [asyncio.ensure_future(b.wait_for_work(timeout_s)) for b in self.partitions]
        try:
            for next_done in asyncio.as_completed(tasks):
                if await next_done:
                    return True
            return False
        finally:
            for task in tasks:
                task.cancel()

    async def aclose(self) -> None:
        for bus in self.partitions:
            if bus.durable is not None:
                await bus.durable.aclose()
            if bus.wire is not None:
                await bus.wire.release()
        await self.redis.aclose()

    async def __aenter__(self) -> PartitionedBus:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


AnyBus = Bus | PartitionedBus  # what a worker runs on
