"""A bus whose slot is resharded under it, key by key, on a real three-master Redis Cluster: claims,
sweeps, dead-letter retries and finishes run between every MIGRATE, and no job is ever left in no
location, in two, or finished twice."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import redis

from echomq import Admission, Bus, Claim, Failure, Finish, NewJob, ids
from echomq.errors import EchoMQError
from echomq.keyspace import Keyspace
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.invariants import job_rows, locations, queue_structure
from echomq.testing.reshard import SlotMigration, slot_of, slot_owner

LANES = ("PLRa", "PLRb", "PLRc")
LONG_MS = 3_600_000
_serial = itertools.count()
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster():
    """Three cluster-enabled redis-server processes, slots split evenly, cluster_state ok."""
    with RedisClusterProcesses(3) as nodes:
        yield nodes


def _tag_on(cluster: RedisClusterProcesses, port: int) -> str:
    """A tag of its own whose slot the master on ``port`` serves."""
    for _ in range(10_000):
        tag = f"mig-{next(_serial)}"
        if slot_owner(cluster, slot_of(Keyspace(tag).ring)) == port:
            return tag
    raise AssertionError("no tag found on that node")


def _problems(port: int, keys: Keyspace) -> list[str]:
    """What breaks the queue's invariants on the node on ``port`` (empty when all holds)."""
    with redis.Redis(port=port) as client:
        return queue_structure(client, keys, job_rows(client, keys))


def _jobs_first(keys: Keyspace) -> Callable[[list[bytes]], list[bytes]]:
    """Job rows (oldest first, so each lane's head moves first), then lanes, then the bus's fixed keys:
    a claim on the source finds its lane but not the row it would pop from it."""

    def order(pending: list[bytes]) -> list[bytes]:
        rank = {f"{keys.prefix}job:": 0, f"{keys.prefix}lane:": 1}

        def place(key: bytes) -> tuple[int, bytes]:  # rows in mint order: each lane's head moves first
            return next((r for p, r in rank.items() if key.decode().startswith(p)), 2), key

        return sorted(pending, key=place)

    return order


def _fixed_first(keys: Keyspace) -> Callable[[list[bytes]], list[bytes]]:
    """The bus's fixed keys (ring, active, ...), then lanes, then job rows: a script sent on with ASKING
    runs on the target while the lanes and rows it names are still on the source."""

    def order(pending: list[bytes]) -> list[bytes]:
        return list(reversed(_jobs_first(keys)(pending)))

    return order


class Traffic:
    """Claims, finishes, sweeps and dead-letter retries on the bus, as between reshard steps; every
    refusal (TRYAGAIN, a moved key) is tolerated, every outcome recorded."""

    def __init__(self, bus: Bus, kill: int = 2) -> None:
        self.bus = bus
        self.held: list[Claim] = []  # claimed, not yet finished
        self.done: list[str] = []  # every job a complete() answered DONE for, in order
        self.kill = kill  # how many claims to dead-letter on purpose (each is then retried)
        self.dead: list[str] = []  # dead-lettered on purpose, not yet back in a lane
        self.retried = 0
        self.refusals = 0
        self.moving = False  # a slot migration is open (between its begin and finish)
        self.claimed_mid_move = 0  # jobs claims returned while it was

    async def _try(self, call: Awaitable[T]) -> T | None:
        try:
            return await call
        except EchoMQError:
            self.refusals += 1
            return None

    async def step(self) -> None:
        claimed = await self._try(self.bus.claim(count=1, lease_ms=LONG_MS)) or []
        self.claimed_mid_move += len(claimed) if self.moving else 0
        self.held += claimed
        still: list[Claim] = []
        for claim in self.held:
            if self.kill > 0:
                failed = await self._try(self.bus.fail(claim, "to retry", retryable=False))
                if failed is Failure.DEAD:
                    self.kill -= 1
                    self.dead.append(claim.job)
                elif failed is None:
                    still.append(claim)
                continue
            outcome = await self._try(self.bus.complete(claim))
            if outcome is Finish.DONE:
                self.done.append(claim.job)
            elif outcome is None:
                still.append(claim)
        self.held = still
        await self._try(self.bus.sweep())
        for job in list(self.dead):
            if await self._try(self.bus.retry_dead(job)):
                self.dead.remove(job)
                self.retried += 1


async def _fill(bus: Bus) -> tuple[list[str], dict[str, list[str]], Claim]:
    """Jobs on three lanes, some due soon from delayed, one parked for an hour, one held by a slow
    worker, and a sweep lock held, so every key the scripts declare exists for the whole migration
    (else Redis refuses the call whole with ASK or TRYAGAIN and the scripts never run mid-move).
    Returns (runnable, where each other job stays, the slow worker's claim)."""
    now = [NewJob(ids.mint("JOB"), lane, b"p") for _ in range(5) for lane in LANES]
    soon = [NewJob(ids.mint("JOB"), lane, b"s", delay_ms=300) for lane in LANES]
    parked = [NewJob(ids.mint("JOB"), "PLRz", b"z", delay_ms=LONG_MS)]
    assert await bus.enqueue_many([*now, *soon, *parked]) == [Admission.ADMITTED] * 19
    [slow] = await bus.claim(count=1, lease_ms=LONG_MS)  # keeps `active` non-empty until the end
    finished, kept = await bus.claim(count=2, lease_ms=LONG_MS)  # `done` and `dead` exist throughout
    assert await bus.complete(finished) is Finish.DONE
    assert await bus.fail(kept, "stays dead", retryable=False) is Failure.DEAD
    await bus.sweep(lock_ms=LONG_MS)  # the sweep lock now exists; later forced sweeps still run whole
    await bus.claim(count=2, lease_ms=200)  # a worker that dies with them: the sweep reclaims them mid-move
    settled = {finished.job: ["done"], kept.job: ["dead"], parked[0].job: ["delayed"]}
    return [job.job for job in (*now, *soon) if job.job not in settled], settled, slow


async def _migrate(bus: Bus, traffic: Traffic, migration: SlotMigration, order) -> None:
    """One move of the bus's slot with traffic between its steps. With the order that moves rows first,
    the rows at the head of each lane and of the claimed jobs go before any other key, so the next
    script on the source finds a lane whose head, or a lease whose row, is on the other node."""
    migration.begin()
    traffic.moving = True
    await traffic.step()
    keys = bus.keys
    heads: list[bytes] = []
    if order is _jobs_first:
        with redis.Redis(port=migration.source_port) as source:
            for lane in LANES:
                heads += [keys.job(job.decode()).encode() for job in source.zrange(keys.lane(lane), 0, 0)]
            # and the rows of the claimed jobs (two of them abandoned): a sweep meets an expired lease
            # whose row is on the other node
            heads += [keys.job(job.decode()).encode() for job in source.zrange(keys.active, 0, -1)]
    for key in heads + [key for key in order(keys)(migration.pending()) if key not in heads]:
        migration.move(key)
        await traffic.step()
    migration.finish()
    traffic.moving = False
    await traffic.step()


@pytest.mark.slow
@pytest.mark.redis_build
@pytest.mark.timeout(300)  # about 130 reshard steps, each with a round of calls that TRYAGAIN may delay
async def test_a_slot_moved_key_by_key_there_and_back_leaves_every_job_in_one_place(cluster):
    """While the bus's slot moves to another master and back, one MIGRATE at a time and in the orders
    that expose each side (rows before lanes, then fixed keys before lanes), claims, finishes, sweeps
    and retries of dead jobs run between the steps; afterwards every job is in exactly one location,
    every runnable job completed exactly once, and the queue's invariants hold on the final owner; and
    claims did run mid-move and stopped before a key on the other node (the in-script stops were used)."""
    home, away = cluster.ports[0], cluster.ports[1]
    tag = _tag_on(cluster, home)
    bus = Bus.from_url(f"redis://127.0.0.1:{home}/0", tag=tag, cluster=True)
    bus.redis.RedisClusterRequestTTL = 6  # redirections per call (16 by default): a TRYAGAIN fails sooner
    try:
        keys = bus.keys
        runnable, settled, slow = await _fill(bus)
        traffic = Traffic(bus)
        slot = slot_of(keys.ring)

        await _migrate(bus, traffic, SlotMigration(cluster, slot, away), _jobs_first)
        assert slot_owner(cluster, slot) == away
        assert _problems(away, keys) == []
        await _migrate(bus, traffic, SlotMigration(cluster, slot, home), _fixed_first)
        assert slot_owner(cluster, slot) == home
        assert _problems(home, keys) == []

        traffic.held.append(slow)  # the slow worker finishes at last
        for _ in range(50):  # drain what is left, the slot now stable
            if len(traffic.done) == len(runnable) and not traffic.held:
                break
            await traffic.step()
        assert sorted(traffic.done) == sorted(set(traffic.done)), "a job completed twice"
        assert sorted(traffic.done) == sorted(runnable)
        with redis.Redis(port=home) as client:
            where = locations(client, keys)
        assert {job: places for job, places in where.items() if job not in runnable} == settled
        assert _problems(home, keys) == []
        assert traffic.retried == 2, "the dead-letter retries did not all happen"
        assert traffic.dead == []
        counters = (await bus.stats()).counters
        assert traffic.claimed_mid_move > 0, "no claim ran while the slot moved: the moves proved nothing"
        assert counters["slot_moving"] > 0, "no script met a key on the other node: nothing was exercised"
        assert counters["unrecorded"] > 0, "no claim ran mid-move with its record key elsewhere"
    finally:
        await bus.aclose()


@pytest.mark.slow
@pytest.mark.redis_build
@pytest.mark.timeout(120)
async def test_a_claim_while_the_slot_moves_keeps_no_record_so_its_retry_claims_anew(cluster):
    """Mid-move, a claim whose record key is on no node here claims but records nothing ('unrecorded'):
    a retry with its request id claims other jobs, and the first claim's jobs stay active (one place)."""
    home, away = cluster.ports[0], cluster.ports[1]
    tag = _tag_on(cluster, home)
    bus = Bus.from_url(f"redis://127.0.0.1:{home}/0", tag=tag, cluster=True)
    try:
        keys = bus.keys
        await _fill(bus)
        migration = SlotMigration(cluster, slot_of(keys.ring), away)
        migration.begin()
        first = await bus.claim(count=1, lease_ms=LONG_MS, request="lost-1")
        again = await bus.claim(count=1, lease_ms=LONG_MS, request="lost-1")  # its reply was lost
        for key in migration.pending():
            migration.move(key)
        migration.finish()
        with redis.Redis(port=away) as target:
            assert target.exists(keys.claim_record("lost-1")) == 0  # no node ever held it
            in_active = {job.decode() for job in target.zrange(keys.active, 0, -1)}
        assert len(first) == len(again) == 1
        assert first[0].job != again[0].job
        assert {first[0].job, again[0].job} <= in_active
        counters = (await bus.stats()).counters
        assert (counters["unrecorded"], counters["replayed"]) == (2, 0)
        assert _problems(away, keys) == []
    finally:
        await bus.aclose()
