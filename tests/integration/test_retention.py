"""Retention of finished rows, amortised with the work (includes/trim.lua, run by complete.lua, fail.lua
and sweep.lua): however fast jobs finish, the done and dead sets hold the rows within their ttl and
hardly any more, and every trimmed row is a tombstone that still absorbs duplicates.

The rows' ttls are real (0 ms, or a short one): nothing here moves a score to simulate time.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import redis
from redis.crc import key_slot

from echomq import Admission, Bus, Failure, Finish, NewJob, Settings, Worker, ids, rows
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.probe import Probe
from tests.support.workers import eventually, running

WINDOW_MS = 600_000  # the dedup window of these tests: tombstones outlive every test


@pytest.fixture
async def bus_with(redis_server, sync_redis, tag):
    """A factory of buses on the test's one tag with the given settings, each watched by a probe (so the
    invariants are checked after every script they run)."""
    made = []

    def make(watch=True, **settings):
        bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(**settings))
        probe = Probe(sync_redis, bus.keys)
        if watch:
            probe.watch(bus)
        made.append(bus)
        return bus, probe

    yield make
    for bus in made:
        await bus.aclose()


async def _finished(bus, count, *, lane="L", dead=False):
    """``count`` jobs admitted, claimed and completed (or dead-lettered), one after another."""
    made = []
    for _ in range(count):
        job = ids.mint("JOB")
        await bus.enqueue(job, lane=lane, payload=b"p:" + job.encode())
        [claim] = await bus.claim()
        if dead:
            assert await bus.fail(claim, "boom", retryable=False) is Failure.DEAD
        else:
            assert await bus.complete(claim, b"r:" + job.encode()) is Finish.DONE
        made.append(claim)
    return made


def _assert_tombstone(probe, job, finished):
    """``job`` is a tombstone: its row gone (payload and result with it), its tombstone in its shared
    hash counting until one dedup window after its finish."""
    assert probe.row(job) == {}
    tomb = probe.tombstone(job)
    assert tomb is not None
    assert tomb.expires_ms == finished + WINDOW_MS
    assert 0 < probe.tombstone_ttl(job) <= WINDOW_MS


async def test_each_complete_trims_the_two_oldest_expired_done_rows_first(bus_with):
    """A complete trims at most two done rows past the result ttl, oldest first, before adding its own:
    the newer expired rows wait for the next finish, and rows within the ttl are never touched."""
    keeping, probe = bus_with(dedup_window_ms=WINDOW_MS)  # the default result ttl: 1 h
    trimming, _ = bus_with(result_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    old = await _finished(keeping, 5)
    assert len(probe.members("done")) == 5  # within the 1 h ttl: a complete trims none of them
    finished = probe.members("done")
    oldest = sorted(finished, key=lambda job: (finished[job], job))

    [newest] = await _finished(trimming, 1)
    done = probe.members("done")
    assert sorted(done) == sorted([*oldest[2:], newest.job])
    for job in oldest[:2]:
        _assert_tombstone(probe, job, int(finished[job]))
    assert probe.counters()["trimmed"] == 2
    assert probe.row(newest.job)["result"] == b"r:" + newest.job.encode()  # its own row stays whole

    await _finished(trimming, 1)
    assert len(probe.members("done")) == 3  # two more trimmed, one added
    assert probe.counters()["trimmed"] == 4
    assert {c.job for c in old} - set(probe.members("done")) == {c.job for c in old[:4]}


async def test_a_tombstone_trimmed_by_a_complete_still_answers_duplicate_and_conflict(bus_with):
    """Rows trimmed on the finish path keep tombstone semantics: within the dedup window the same id is
    DUPLICATE (same lane and payload) or CONFLICT (other), nothing changes, and a retry of its own
    complete is still told DONE."""
    bus, probe = bus_with(result_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    first, second, third = await _finished(bus, 3)
    assert set(probe.members("done")) == {third.job}
    for claim in (first, second):
        assert (await bus.inspect(claim.job)).trimmed is True
    probe.check()
    before = probe.snapshot()
    for claim in (first, second):
        payload = b"p:" + claim.job.encode()
        assert await bus.enqueue(claim.job, lane="L", payload=payload) is Admission.DUPLICATE
        assert await bus.enqueue(claim.job, lane="L", payload=b"other") is Admission.CONFLICT
        assert await bus.enqueue(claim.job, lane="M", payload=payload) is Admission.CONFLICT
    probe.assert_unchanged(before, duplicate=2, conflict=4)
    assert await bus.complete(first) is Finish.DONE
    probe.assert_unchanged(before, duplicate=2, conflict=4)


async def test_a_zero_dedup_window_makes_a_complete_delete_the_rows_it_trims(bus_with):
    """With no dedup window the rows a complete trims are gone at once, and their ids are admitted anew."""
    bus, probe = bus_with(result_ttl_ms=0, dedup_window_ms=0)
    first, second = await _finished(bus, 2)
    assert probe.check() == {second.job: "done"}
    assert await bus.enqueue(first.job, lane="L", payload=b"again") is Admission.ADMITTED


async def test_a_claim_replayed_after_its_id_was_admitted_anew_gets_nothing(bus_with):
    """With windows shorter than a lease, a claim retried after its done id was trimmed, admitted anew and
    claimed by another worker under the same token gets nothing: the other worker keeps the job."""
    bus, probe = bus_with(result_ttl_ms=0, dedup_window_ms=0)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"first")
    [a] = await bus.claim(lease_ms=60_000, owner="A", request="req-A")
    assert await bus.complete(a) is Finish.DONE
    assert (await bus.sweep()).trimmed == 1  # the tombstone expires at once (no dedup window)
    assert probe.check() == {}
    assert probe.client.exists(bus.keys.claim_record("req-A")) == 1  # A's record still names the id
    assert await bus.enqueue(job, lane="L", payload=b"second") is Admission.ADMITTED
    [b] = await bus.claim(lease_ms=60_000, owner="B", request="req-B")
    assert (b.job, b.token) == (a.job, a.token)  # attempts restarted: the same token as A's

    before = probe.snapshot()
    assert await bus.claim(lease_ms=60_000, owner="A", request="req-A") == []
    probe.assert_unchanged(before)
    assert (probe.row(job)["owner"], probe.row(job)["request"]) == (b"B", b"req-B")
    assert [(c.job, c.token, c.payload) for c in await bus.claim(request="req-B")] == [(job, 1, b"second")]
    assert await bus.complete(b, b"by B") is Finish.DONE
    assert probe.row(job)["result"] == b"by B"


async def test_a_tombstone_is_stored_compactly_whatever_the_payload_was(bus_with):
    """A row whose 40 kB payload (in 64-byte chunks, over 512 fields) made it a hash table in Redis is
    deleted when trimmed: its tombstone is one field of the compact hash of its mint time's tombstones."""
    bus, probe = bus_with(result_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"x" * 40_000)
    [claim] = await bus.claim()
    await bus.complete(claim)
    whole = probe.client.memory_usage(bus.keys.job(job))
    assert probe.client.object("encoding", bus.keys.job(job)) == b"hashtable"
    finished = int(probe.members("done")[job])
    assert (await bus.sweep()).trimmed == 1
    assert probe.client.exists(bus.keys.job(job)) == 0
    bucket = bus.keys.tombstone(job)[0]
    assert probe.client.object("encoding", bucket) in (b"listpack", b"ziplist")
    assert probe.client.memory_usage(bucket) * 20 < whole
    _assert_tombstone(probe, job, finished)
    assert await bus.enqueue(job, lane="L", payload=b"x" * 40_000) is Admission.DUPLICATE


async def test_a_stale_complete_trims_nothing(bus_with):
    """A complete refused as stale changes nothing but the stale counter, and a retry of a complete that
    landed (answered DONE) changes nothing at all, expired rows included."""
    bus, probe = bus_with(result_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    [first] = await _finished(bus, 1)
    before = probe.snapshot()
    assert await bus.complete(dataclasses.replace(first, token=first.token + 1)) is Finish.STALE
    assert await bus.complete(first) is Finish.DONE
    probe.assert_unchanged(before, stale=1)


async def test_dead_rows_are_trimmed_by_later_dead_letters_only_past_the_dead_ttl(bus_with):
    """A fail that dead-letters trims up to two dead rows past the dead ttl, oldest first: with the
    default ttl (180 days) they stay whole; past a ttl of 0 they become tombstones retry_dead refuses."""
    keeping, probe = bus_with(dedup_window_ms=WINDOW_MS)
    trimming, _ = bus_with(dead_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    old = await _finished(keeping, 3, dead=True)
    assert sorted(probe.members("dead")) == sorted(c.job for c in old)
    assert all(probe.row(c.job)["payload"] for c in old)
    finished = probe.members("dead")
    oldest = sorted(finished, key=lambda job: (finished[job], job))

    [newest] = await _finished(trimming, 1, dead=True)
    assert sorted(probe.members("dead")) == sorted([oldest[2], newest.job])
    for job in oldest[:2]:
        _assert_tombstone(probe, job, int(finished[job]))
        assert await trimming.retry_dead(job) is False
        assert await trimming.enqueue(job, lane="L", payload=b"p:" + job.encode()) is Admission.DUPLICATE
    assert probe.row(newest.job)["error"] == b"boom"  # its own row stays whole
    assert probe.counters()["trimmed"] == 2
    assert await trimming.retry_dead(oldest[2]) is True  # still whole: it was not among the two


async def test_a_sweep_trims_even_when_another_process_holds_the_sweep_lock(bus_with):
    """Trimming is not gated by the sweep lock: a sweep that finds the lock held (swept=False) still trims
    expired rows, so an idle bus catches up at every worker's sweep, not once per period."""
    keeping, probe = bus_with(dedup_window_ms=WINDOW_MS)
    trimming, _ = bus_with(result_ttl_ms=0, dead_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    assert (await trimming.sweep(lock_ms=600_000)).swept is True  # another process's lock, for 10 min
    done = await _finished(keeping, 3)
    dead = await _finished(keeping, 2, dead=True)
    report = await trimming.sweep(lock_ms=600_000)
    assert (report.swept, report.trimmed) == (False, 5)
    assert probe.members("done") == {}
    assert probe.members("dead") == {}
    assert probe.check() == {c.job: "done" for c in done} | {c.job: "dead" for c in dead}
    assert (await trimming.sweep(lock_ms=600_000)).trimmed == 0


async def test_done_rows_stay_bounded_at_full_speed_with_a_zero_result_ttl(bus_with):
    """A worker completing 3,000 jobs as fast as it can, with result_ttl 0 and its sweep on the default
    10 s timer, never lets done hold more than a few rows; every finished row becomes a tombstone."""
    bus, probe = bus_with(watch=False, result_ttl_ms=0, dedup_window_ms=WINDOW_MS)
    total, batch = 3000, 50
    sizes = []
    finished_producing = asyncio.Event()

    async def produce():
        for start in range(0, total, batch):
            await bus.enqueue_many(
                [NewJob(ids.mint("JOB"), f"L{(start + i) % 20}", b"p" * 64) for i in range(batch)]
            )
            await asyncio.sleep(0.005)  # a steady pace, not one burst
        finished_producing.set()

    async def sample():
        while True:
            sizes.append(await bus.redis.zcard(bus.keys.done))
            await asyncio.sleep(0.01)

    async with running(Worker(bus, lambda job: b"r" * 64, concurrency=16)):
        sampler = asyncio.create_task(sample())
        await produce()
        await eventually(lambda: probe.counters().get("completed", 0) == total, 120, "all completed")
        sampler.cancel()
    sizes.append(await bus.redis.zcard(bus.keys.done))
    counters = probe.counters()
    assert len(sizes) >= 10
    assert max(sizes) <= 50, f"done grew to {max(sizes)} rows past their ttl"
    assert counters["trimmed"] >= total - sizes[-1] - 1  # the rest became tombstones
    states = probe.check()
    assert (len(states), set(states.values())) == (total, {"done"})  # tombstones, or whole in done
    assert finished_producing.is_set()


def _tombstones(probe, bus):
    """Every tombstone of ``bus``, from its shared hashes."""
    found = []
    for key in probe.client.scan_iter(match=f"{bus.keys.prefix}tomb:*", count=1000):
        found += [rows.parse_tombstone(value) for value in probe.client.hvals(key)]
    return found


async def test_rows_past_a_short_result_ttl_stay_bounded_and_none_is_trimmed_early(bus_with):
    """Completing 3,000 jobs in paced batches of 20 with a 100 ms result ttl and no sweep at all: after
    every batch the whole rows past their ttl stay few (each complete trims two), and no tombstone was
    trimmed before its ttl had passed."""
    ttl = 100
    bus, probe = bus_with(watch=False, result_ttl_ms=ttl, dedup_window_ms=WINDOW_MS)
    total, batch = 3000, 20
    past_ttl = []
    for start in range(0, total, batch):
        jobs = [NewJob(ids.mint("JOB"), f"L{(start + i) % 20}", b"p" * 64) for i in range(batch)]
        await bus.enqueue_many(jobs)
        claims = await bus.claim(count=batch)
        outcomes = await asyncio.gather(*(bus.complete(claim, b"r" * 64) for claim in claims))
        assert outcomes == [Finish.DONE] * batch
        past_ttl.append(await bus.redis.zcount(bus.keys.done, "-inf", probe.now_ms() - ttl))
        latest = max((t.expires_ms for t in _tombstones(probe, bus)), default=0) - WINDOW_MS
        assert latest <= probe.now_ms() - ttl, "a row was trimmed before its ttl had passed"
        await asyncio.sleep(0.01)  # at most 20 jobs finish per 10 ms
    counters = probe.counters()
    assert counters["completed"] == total
    assert max(past_ttl) <= 400, f"{max(past_ttl)} whole rows past their ttl"
    assert counters["trimmed"] >= total - len(probe.members("done"))
    assert len(_tombstones(probe, bus)) == counters["trimmed"]


async def test_a_complete_still_finishes_while_an_expired_row_is_migrating_on_a_cluster():
    """On a Redis Cluster whose slot is being migrated key by key, a complete whose trim meets an expired
    row already moved to the other node stops trimming there and still completes: a trim never fails the
    finish it rides in (the moved row is trimmed after the migration, on its new node)."""
    with RedisClusterProcesses(3) as cluster:
        url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
        keeping = Bus.from_url(url, tag="trim", cluster=True)
        trimming = Bus.from_url(url, tag="trim", cluster=True, settings=Settings(result_ttl_ms=0))
        nodes = [redis.Redis(port=port) for port in cluster.ports]
        try:
            [moved] = await _finished(keeping, 1)
            job = ids.mint("JOB")
            await trimming.enqueue(job, lane="L", payload=b"p")
            [claim] = await trimming.claim()

            slot = key_slot(keeping.keys.done.encode())
            source = next(n for n in nodes if n.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) > 0)
            target = next(n for n in nodes if n is not source)
            source_id, target_id = (n.execute_command("CLUSTER", "MYID").decode() for n in (source, target))
            target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
            source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
            port = target.connection_pool.connection_kwargs["port"]
            source.execute_command(
                "MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS", keeping.keys.job(moved.job)
            )

            assert await trimming.complete(claim) is Finish.DONE
            done = {m.decode() for m in source.zrange(keeping.keys.done, 0, -1)}
            assert done == {moved.job, job}  # the moved row is left in done, not half-trimmed
            assert source.hget(keeping.keys.stats, "trimmed") is None
            assert source.hget(keeping.keys.job(job), rows.STATE) == b"done"
        finally:
            for node in nodes:
                node.close()
            await keeping.aclose()
            await trimming.aclose()
