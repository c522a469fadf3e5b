"""The sweep (a due delayed job promoted, an expired lease reclaimed, a done row trimmed) and a
dead-letter retry on a real three-master Redis Cluster, each run once while the bus's slot moves, with
every key the script declares present on the node that runs it but the job's lane, or its row, on the
other node: no job is left in no location or without its row, no second copy of a key is written on the
target (the move completes), and the job moves once the slot is stable again. Each test fails with the
scripts before the fix of a5af5a2 (sweep.lua, retry_dead.lua, includes/trim.lua)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis

from echomq import Bus, Failure, Finish, NewJob, ids
from echomq.core import Settings
from echomq.errors import EchoMQError
from echomq.keyspace import Keyspace
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.invariants import job_rows, locations, queue_structure
from echomq.testing.reshard import SlotMigration, slot_of, slot_owner

LONG_MS = 3_600_000
SHORT_MS = 200  # the victim's delay or lease: past once the test has slept EXPIRE_S
EXPIRE_S = 0.5
LANE, KEEP = "PLRa", "PLRk"  # the victim's lane, and a lane that stays queued (the ring never empties)
_serial = itertools.count()

pytestmark = [pytest.mark.slow, pytest.mark.redis_build, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterProcesses]:
    """Three cluster-enabled redis-server processes, slots split evenly, cluster_state ok."""
    with RedisClusterProcesses(3) as nodes:
        yield nodes


def _bus_on_first_master(cluster: RedisClusterProcesses, settings: Settings | None = None) -> Bus:
    """A bus of its own tag whose slot the first master serves."""
    home = cluster.ports[0]
    tag = next(
        t
        for t in (f"mig-sw-{next(_serial)}" for _ in range(10_000))
        if slot_owner(cluster, slot_of(Keyspace(t).ring)) == home
    )
    the_bus = Bus.from_url(f"redis://127.0.0.1:{home}/0", tag=tag, settings=settings, cluster=True)
    the_bus.redis.RedisClusterRequestTTL = 6  # type: ignore[union-attr]
    return the_bus


@pytest.fixture
async def bus(cluster: RedisClusterProcesses) -> AsyncIterator[Bus]:
    """A bus of its own tag whose slot the first master serves."""
    the_bus = _bus_on_first_master(cluster)
    yield the_bus
    await the_bus.aclose()


@pytest.fixture
async def short_bus(cluster: RedisClusterProcesses) -> AsyncIterator[Bus]:
    """Such a bus whose done rows are trimmed to tombstones once SHORT_MS old."""
    the_bus = _bus_on_first_master(cluster, Settings(result_ttl_ms=SHORT_MS))
    yield the_bus
    await the_bus.aclose()


def _sweep_keys(keys: Keyspace) -> list[str]:
    """The keys sweep.lua declares (KEYS[1..9])."""
    fixed = [keys.active, keys.delayed, keys.done, keys.dead, keys.ring, keys.wake, keys.stats]
    return [*fixed, keys.sweep_lock, keys.waiting]


def _retry_keys(keys: Keyspace, job: str) -> list[str]:
    """The keys retry_dead.lua declares (KEYS[1..6])."""
    return [keys.job(job), keys.dead, keys.ring, keys.wake, keys.stats, keys.waiting]


async def _setup(
    bus: Bus, victim: NewJob, *, lease_ms: int = 0, kill: bool = False, finish: bool = False
) -> None:
    """The victim, and around it what keeps every declared key present for the whole test (else Redis
    refuses the script whole, ASK or TRYAGAIN, and it never runs): a done job, a dead one, a slow
    worker's claim (`active`), the sweep lock, a queued neighbour on the victim's lane (so the lane key
    exists and moves), a lane that stays queued (`ring`, `waiting`), a job parked for an hour
    (`delayed`) and a wake token. With ``lease_ms`` the victim is claimed with that lease; with ``kill``
    it is then dead-lettered; with ``finish`` it is completed last (so its done row is the newest)."""
    pair = [NewJob(ids.mint("JOB"), "PLRd", b"d") for _ in range(2)]
    await bus.enqueue_many(pair)
    finished, kept = await bus.claim(count=2, lease_ms=LONG_MS)
    assert await bus.complete(finished) is Finish.DONE
    assert await bus.fail(kept, "stays dead", retryable=False) is Failure.DEAD
    await bus.enqueue_many([NewJob(ids.mint("JOB"), "PLRs", b"s")])
    assert len(await bus.claim(count=1, lease_ms=LONG_MS)) == 1  # the slow worker keeps `active`
    await bus.sweep(lock_ms=LONG_MS)  # the lock exists; the test's sweeps are forced (lock_ms=0)
    await bus.enqueue_many([victim])
    if lease_ms or finish:
        [claim] = await bus.claim(count=1, lease_ms=lease_ms or LONG_MS)
        assert claim.job == victim.job
        if kill:
            assert await bus.fail(claim, "to retry", retryable=False) is Failure.DEAD
    neighbour = NewJob(ids.mint("JOB"), LANE, b"n")
    keep = [NewJob(ids.mint("JOB"), KEEP, b"k") for _ in range(2)]
    parked = NewJob(ids.mint("JOB"), "PLRz", b"z", delay_ms=LONG_MS)
    await bus.enqueue_many([neighbour, *keep, parked])
    await bus.redis.lpush(bus.keys.wake, "1")  # type: ignore[misc]
    if finish:
        assert await bus.complete(claim) is Finish.DONE


def _present(port: int, names: list[str], *, asking: bool) -> list[str]:
    """Which of ``names`` the node on ``port`` holds (``asking``: it imports the slot, so each read is
    sent after ASKING; the source answers ASK for a key it lacks)."""
    held = []
    with redis.Redis(port=port, single_connection_client=True) as client:
        for name in names:
            if asking:
                client.execute_command("ASKING")  # type: ignore[no-untyped-call]
            with contextlib.suppress(redis.exceptions.AskError):
                if client.exists(name):
                    held.append(name)
    return held


async def _mid_move(
    bus: Bus,
    cluster: RedisClusterProcesses,
    first: list[str],
    declared: list[str],
    on_target: bool,
    call: Callable[[], Awaitable[Any]],
) -> tuple[SlotMigration, Any]:
    """Open the move of the bus's slot to the second master, MIGRATE the keys ``first`` (in order), let
    the victim's delay or lease pass, check that every ``declared`` key is on the side that will run the
    script (the target if ``on_target``, else the source), run ``call`` once there (a refusal is
    tolerated: the pre-fix scripts fail on a key elsewhere), then finish the move; a key that a script
    wrote a second copy of on the target makes the finish fail (BUSYKEY). Returns the migration and the
    call's reply (None when refused)."""
    migration = SlotMigration(cluster, slot_of(bus.keys.ring), cluster.ports[1])
    migration.begin()
    migration.move_all(first)
    await asyncio.sleep(EXPIRE_S)  # the victim's delay or lease has passed (server clock)
    runs_on = migration.target_port if on_target else migration.source_port
    assert _present(runs_on, declared, asking=on_target) == declared, (
        "the script would be refused whole: nothing tested"
    )
    reply = None
    with contextlib.suppress(EchoMQError):
        reply = await call()
    migration.finish()
    assert slot_owner(cluster, migration.slot) == migration.target_port
    return migration, reply


async def _check(bus: Bus, port: int, victim: str, places: list[str]) -> None:
    """The victim is in exactly ``places`` on the node on ``port``, the queue's invariants hold there,
    and exactly one script stopped before a key on the other node (the path under test was reached)."""
    with redis.Redis(port=port) as client:
        where = locations(client, bus.keys)
        problems = queue_structure(client, bus.keys, job_rows(client, bus.keys))
    assert where.get(victim, []) == places
    assert problems == []
    assert (await bus.stats()).counters["slot_moving"] == 1


# --- sweep: promotion of a due delayed job ----------------------------------------------------------


async def test_promotion_into_a_lane_on_the_target_waits_while_the_sweep_runs_on_the_source(bus, cluster):
    """A due delayed job whose lane has moved to the target, while its row and every key the sweep
    declares are still on the source, stays delayed mid-move (not in no location) and is promoted after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v", delay_ms=SHORT_MS)
    await _setup(bus, victim)
    first = [keys.lane(LANE)]
    migration, _ = await _mid_move(bus, cluster, first, _sweep_keys(keys), False, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["delayed"])
    assert (await bus.sweep()).promoted == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


async def test_promotion_on_the_target_writes_no_copy_of_a_lane_still_on_the_source(bus, cluster):
    """A due delayed job whose row and every key the sweep declares have moved to the target (where the
    sweep then runs, after ASKING) while its lane is still on the source is not promoted mid-move: no
    second copy of the lane is written on the target, the move completes, and the job is promoted after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v", delay_ms=SHORT_MS)
    await _setup(bus, victim)
    first = [*_sweep_keys(keys), keys.job(victim.job)]
    migration, _ = await _mid_move(bus, cluster, first, _sweep_keys(keys), True, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["delayed"])
    assert (await bus.sweep()).promoted == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


async def test_promotion_on_the_target_of_a_row_still_on_the_source_waits(bus, cluster):
    """A due delayed job whose row is still on the source while every key the sweep declares has moved to
    the target (where the sweep runs) stays delayed mid-move (its row unread there is not a missing job)
    and is promoted after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v", delay_ms=SHORT_MS)
    await _setup(bus, victim)
    migration, _ = await _mid_move(bus, cluster, _sweep_keys(keys), _sweep_keys(keys), True, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["delayed"])
    assert (await bus.sweep()).promoted == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


# --- sweep: reclaim of an expired lease -------------------------------------------------------------


async def test_reclaim_into_a_lane_on_the_target_waits_while_the_sweep_runs_on_the_source(bus, cluster):
    """An expired lease whose lane has moved to the target, while its row and every key the sweep
    declares are still on the source, stays active mid-move (not in no location) and is reclaimed after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, lease_ms=SHORT_MS)
    first = [keys.lane(LANE)]
    migration, _ = await _mid_move(bus, cluster, first, _sweep_keys(keys), False, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["active"])
    assert (await bus.sweep()).reclaimed == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


async def test_reclaim_on_the_target_writes_no_copy_of_a_lane_still_on_the_source(bus, cluster):
    """An expired lease whose row and every key the sweep declares have moved to the target (where the
    sweep runs) while its lane is still on the source stays active mid-move: no second copy of the lane
    is written on the target, the move completes, and the job is reclaimed after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, lease_ms=SHORT_MS)
    first = [*_sweep_keys(keys), keys.job(victim.job)]
    migration, _ = await _mid_move(bus, cluster, first, _sweep_keys(keys), True, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["active"])
    assert (await bus.sweep()).reclaimed == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


async def test_reclaim_on_the_target_of_a_row_still_on_the_source_waits(bus, cluster):
    """An expired lease whose row is still on the source while every key the sweep declares has moved to
    the target (where the sweep runs) stays active mid-move (its row unread there is not a missing job)
    and is reclaimed after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, lease_ms=SHORT_MS)
    migration, _ = await _mid_move(bus, cluster, _sweep_keys(keys), _sweep_keys(keys), True, bus.sweep)
    await _check(bus, migration.target_port, victim.job, ["active"])
    assert (await bus.sweep()).reclaimed == 1
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


# --- retry_dead: a dead job back to its lane --------------------------------------------------------


async def test_a_dead_retry_into_a_lane_on_the_target_waits_on_the_source(bus, cluster):
    """A dead job whose lane has moved to the target, while its row and every key retry_dead declares
    are still on the source, stays dead when retried mid-move (not in no location) and moves after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, lease_ms=LONG_MS, kill=True)
    declared = _retry_keys(keys, victim.job)
    call = functools.partial(bus.retry_dead, victim.job)
    migration, _ = await _mid_move(bus, cluster, [keys.lane(LANE)], declared, False, call)
    await _check(bus, migration.target_port, victim.job, ["dead"])
    assert await bus.retry_dead(victim.job) is True
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


async def test_a_dead_retry_on_the_target_writes_no_copy_of_a_lane_still_on_the_source(bus, cluster):
    """A dead job whose row and every key retry_dead declares have moved to the target (where the retry
    runs, after ASKING) while its lane is still on the source stays dead when retried mid-move: no second
    copy of the lane is written on the target, the move completes, and the retry moves it after."""
    keys = bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, lease_ms=LONG_MS, kill=True)
    declared = _retry_keys(keys, victim.job)
    call = functools.partial(bus.retry_dead, victim.job)
    migration, _ = await _mid_move(bus, cluster, declared, declared, True, call)
    await _check(bus, migration.target_port, victim.job, ["dead"])
    assert await bus.retry_dead(victim.job) is True
    await _check(bus, migration.target_port, victim.job, [f"lane:{LANE}"])


# --- sweep: trimming an expired done row -------------------------------------------------------------


def _row(port: int, keys: Keyspace, job: str) -> dict[bytes, bytes]:
    with redis.Redis(port=port) as client:
        return client.hgetall(keys.job(job))  # type: ignore[return-value]


async def test_a_trim_on_the_source_mid_move_keeps_the_row_as_a_tombstone(short_bus, cluster):
    """Done rows past the result ttl, trimmed by a sweep on the source while the slot moves (every key
    on the source), keep their tombstones: no row is deleted and left unwritten, none left in done."""
    bus, keys = short_bus, short_bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, finish=True)
    migration, report = await _mid_move(bus, cluster, [], _sweep_keys(keys), False, bus.sweep)
    with redis.Redis(port=migration.target_port) as client:
        where, rows = locations(client, keys), job_rows(client, keys)
        problems = queue_structure(client, keys, rows)
        ttl = client.pttl(keys.job(victim.job))
    assert [job for job in where if job not in rows] == [], "a location names a job whose row is gone"
    assert problems == []
    assert (rows[victim.job]["state"], "trimmed" in rows[victim.job]) == ("done", True)
    assert victim.job not in where
    assert ttl > 0  # the tombstone expires one dedup window after its finish
    assert report is not None
    assert report.trimmed >= 1


async def test_a_trim_on_the_target_of_a_row_still_on_the_source_waits(short_bus, cluster):
    """A done row past the result ttl, still on the source while every key the sweep declares has moved
    to the target (where the sweep runs), stays in done mid-move (its row unread there is not a trimmed
    one) and is trimmed to a tombstone after the move."""
    bus, keys = short_bus, short_bus.keys
    victim = NewJob(ids.mint("JOB"), LANE, b"v")
    await _setup(bus, victim, finish=True)
    sweep_keys = _sweep_keys(keys)
    migration, _ = await _mid_move(bus, cluster, sweep_keys, sweep_keys, True, bus.sweep)
    with redis.Redis(port=migration.target_port) as client:
        assert locations(client, keys).get(victim.job) == ["done"]
    assert b"T" not in _row(migration.target_port, keys, victim.job)  # not trimmed in place
    assert (await bus.sweep()).trimmed >= 1
    assert _row(migration.target_port, keys, victim.job) == {}  # trimmed: the row gone, its tombstone
    with redis.Redis(port=migration.target_port) as client:  # in the shared hash on the target
        assert job_rows(client, keys)[victim.job]["trimmed"]
