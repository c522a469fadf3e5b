"""sweep.lua through echomq.sweep.sweep: reclaim expired leases, promote due jobs, trim finished rows.

Lease expiry is simulated by moving a job's score in ``active`` to 0 (see tests/support/probe.py): the
sweep compares that deadline with the server clock, so it is then past, exactly as if time had passed.
"""

from __future__ import annotations

import asyncio

import pytest

from echomq import Admission, Bus, Finish, NewJob, Settings, UnknownJob, ids
from tests.support.probe import Probe


@pytest.fixture
async def watched_bus(redis_server, sync_redis, tag):
    """A factory of buses with given settings on the test's tag, each watched by a probe."""
    made = []

    def make(**settings):
        bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(**settings))
        probe = Probe(sync_redis, bus.keys)
        probe.watch(bus)
        made.append(bus)
        return bus, probe

    yield make
    for bus in made:
        await bus.aclose()


@pytest.fixture
def trimming(watched_bus):
    """A bus that trims done rows at the first sweep (result ttl 0) and absorbs duplicates for 10 min."""
    return watched_bus(result_ttl_ms=0, dedup_window_ms=600_000)


async def test_an_expired_lease_goes_back_to_its_lane_at_the_mint_position(bus, probe):
    """A job past its lease deadline is reclaimed: queued again ahead of later jobs, deadline cleared."""
    first, later = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue_many([NewJob(first, "L", b""), NewJob(later, "L", b"")])
    [claim] = await bus.claim()
    assert claim.job == first
    probe.check()
    probe.expire(first)  # simulates the lease running out
    report = await bus.sweep()
    assert (report.reclaimed, report.dead, report.promoted, report.trimmed) == (1, 0, 0, 0)
    assert report.swept is True
    assert probe.check() == {first: "queued", later: "queued"}
    assert probe.lane("L") == [first, later]
    assert "deadline" not in probe.row(first)
    assert probe.ring() == ["L"]
    assert probe.counters()["reclaimed"] == 1
    assert probe.wake_tokens() >= 1


async def test_a_live_lease_is_left_alone(bus, probe):
    """A sweep does not touch a job whose lease deadline is still ahead."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    await bus.claim(lease_ms=600_000)
    before = probe.snapshot()
    report = await bus.sweep()
    assert (report.reclaimed, report.dead) == (0, 0)
    assert probe.check() == {job: "active"}
    probe.assert_unchanged(before)


async def test_a_short_real_lease_expires_on_the_server_clock(bus, probe):
    """A job claimed with a 1 ms lease is reclaimed by a sweep once the server clock has passed it."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim(lease_ms=1)
    while probe.now_ms() <= claim.deadline_ms:
        await asyncio.sleep(0.005)
    assert (await bus.sweep()).reclaimed == 1
    assert probe.check() == {job: "queued"}


async def test_an_expired_lease_on_the_last_try_dead_letters_the_job(bus, probe):
    """A job whose lease expired on its last allowed try goes to dead with the reason recorded."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", max_attempts=2)
    for expected in ("queued", "dead"):
        await bus.claim()
        probe.check()
        probe.expire(job)  # simulates the lease running out
        report = await bus.sweep()
        assert probe.check() == {job: expected}
    assert (report.reclaimed, report.dead) == (0, 1)
    assert probe.field(job, "error") == "lease expired on the last of 2 attempts"
    assert probe.lane("L") == []
    assert probe.ring() == []
    counters = probe.counters()
    assert (counters["reclaimed"], counters["dead"]) == (1, 1)


async def test_sweep_promotes_due_delayed_jobs_to_their_lanes(bus, probe):
    """Delayed jobs whose due time passed move to their lanes; the rest stay and set next_due."""
    due, waiting = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(due, lane="A", payload=b"", delay_ms=60_000)
    await bus.enqueue(waiting, lane="B", payload=b"", delay_ms=120_000)
    probe.make_due(due)  # simulates its delay passing
    report = await bus.sweep()
    assert report.promoted == 1
    assert report.next_due_ms == probe.members("delayed")[waiting]
    assert probe.check() == {due: "queued", waiting: "delayed"}
    assert probe.ring() == ["A"]
    assert probe.counters()["promoted"] == 1


async def _crashed_holding(bus, probe, count):
    """``count`` jobs on two lanes, claimed by a worker that then died (leases run out), and a delayed
    job now due; the wake tokens of their enqueues are spent."""
    jobs = [ids.mint("JOB") for _ in range(count)]
    await bus.enqueue_many([NewJob(job, f"L{i % 2}", b"") for i, job in enumerate(jobs)])
    await bus.claim(count=count)
    for job in jobs:
        probe.expire(job)  # simulates the leases running out
    due = ids.mint("JOB")
    await bus.enqueue(due, lane="L9", payload=b"", delay_ms=60_000)
    probe.make_due(due)  # simulates its delay passing
    probe.client.delete(bus.keys.wake)


async def test_a_sweep_pushes_a_wake_token_for_every_job_it_moves_to_a_lane(watched_bus):
    """Each job a sweep reclaims or promotes pushes one wake token, so as many idle workers wake."""
    bus, probe = watched_bus()
    await _crashed_holding(bus, probe, 5)
    report = await bus.sweep()
    assert (report.reclaimed, report.promoted) == (5, 1)
    assert probe.wake_tokens() == 6
    probe.check()


async def test_the_tokens_a_sweep_pushes_stop_at_the_wake_cap(watched_bus):
    """A sweep that moves more jobs than the wake cap leaves the wake list at the cap, not past it."""
    bus, probe = watched_bus(wake_cap=4)
    await _crashed_holding(bus, probe, 6)
    probe.client.lpush(bus.keys.wake, "1")
    assert (await bus.sweep()).reclaimed == 6
    assert probe.wake_tokens() == 4
    probe.check()


async def test_sweep_is_idempotent(bus, probe):
    """A second sweep right after the first finds nothing to do and changes nothing."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    await bus.claim()
    probe.expire(job)  # simulates the lease running out
    await bus.sweep()
    probe.check()
    before = probe.snapshot()
    report = await bus.sweep()
    assert (report.promoted, report.reclaimed, report.dead, report.trimmed) == (0, 0, 0, 0)
    probe.assert_unchanged(before)


async def test_sweep_moves_at_most_limit_jobs_per_step(bus, probe):
    """With limit n, one sweep reclaims at most n expired leases; the next sweep takes the rest."""
    minted = [ids.mint("JOB") for _ in range(5)]
    await bus.enqueue_many([NewJob(job, f"L{i}", b"") for i, job in enumerate(minted)])
    await bus.claim(count=5)
    for job in minted:
        probe.expire(job)  # simulates the leases running out
    assert (await bus.sweep(limit=2)).reclaimed == 2
    assert sorted(probe.check().values()) == ["active"] * 3 + ["queued"] * 2
    assert (await bus.sweep(limit=2)).reclaimed == 2
    probe.check()
    assert (await bus.sweep(limit=2)).reclaimed == 1
    assert set(probe.check().values()) == {"queued"}


async def test_reclaimed_jobs_reenter_the_ring_in_deadline_order(bus, probe):
    """Reclaimed jobs of several lanes rejoin the ring in the order their leases expired."""
    a, b = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue_many([NewJob(a, "A", b""), NewJob(b, "B", b"")])
    await bus.claim(count=2)
    probe.client.zadd(bus.keys.active, {b: 1, a: 2})  # simulates both leases running out, b's first
    await bus.sweep()
    assert probe.ring() == ["B", "A"]
    probe.check()


async def test_a_locked_sweep_still_promotes_but_does_not_reclaim(bus, probe):
    """With lock_ms, a second sweep in the period reports swept=False: it promotes, but reclaims nothing."""
    stalled, due = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(stalled, lane="A", payload=b"")
    await bus.claim()
    first = await bus.sweep(lock_ms=600_000)
    assert first.swept is True
    assert probe.client.pttl(bus.keys.sweep_lock) > 0

    probe.expire(stalled)  # simulates the lease running out
    await bus.enqueue(due, lane="B", payload=b"", delay_ms=60_000)
    probe.make_due(due)  # simulates its delay passing
    second = await bus.sweep(lock_ms=600_000)
    assert second.swept is False
    assert (second.promoted, second.reclaimed) == (1, 0)
    assert probe.check() == {stalled: "active", due: "queued"}

    forced = await bus.sweep()  # lock_ms=0 ignores the lock
    assert (forced.swept, forced.reclaimed) == (True, 1)
    assert probe.check() == {stalled: "queued", due: "queued"}


async def test_the_sweep_lock_expires_after_its_period(bus, probe):
    """Once the lock period has passed, the next locked sweep runs the reclaim step again."""
    assert (await bus.sweep(lock_ms=1)).swept is True
    while probe.client.exists(bus.keys.sweep_lock):
        await asyncio.sleep(0.005)
    assert (await bus.sweep(lock_ms=1)).swept is True
    probe.check()


async def test_a_fresh_done_row_is_kept_whole(bus, probe):
    """With the default result ttl, a sweep right after a complete keeps the row and its result."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p")
    [claim] = await bus.claim()
    await bus.complete(claim, b"r")
    assert (await bus.sweep()).trimmed == 0
    assert probe.check() == {job: "done"}
    assert probe.row(job)["result"] == b"r"


async def test_a_done_row_past_the_result_ttl_is_trimmed_to_a_tombstone(trimming):
    """After the result ttl the row keeps only its tombstone fields, leaves done, and expires later."""
    bus, probe = trimming
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"payload")
    [claim] = await bus.claim()
    await bus.complete(claim, b"result")
    assert probe.check() == {job: "done"}
    finished = int(probe.members("done")[job])
    report = await bus.sweep()
    assert report.trimmed == 1
    assert probe.check() == {job: "done"}
    assert probe.members("done") == {}
    assert probe.row(job) == {}  # the row is gone: its tombstone is a field of a shared hash
    tomb = probe.tombstone(job)
    assert tomb is not None
    assert (tomb.state, tomb.attempts, tomb.expires_ms) == (b"done", 1, finished + 600_000)
    key = bus.keys.tombstone(job)[0]
    expires_at = probe.client.pexpiretime(key) if _has_pexpiretime(probe) else None
    if expires_at is not None:
        assert expires_at == finished + 600_000
    assert 0 < probe.tombstone_ttl(job) <= 600_000
    info = await bus.inspect(job)
    assert info.trimmed is True
    assert (info.location, info.payload, info.result) == (None, None, None)
    assert probe.counters()["trimmed"] == 1
    assert (await bus.sweep()).trimmed == 0


async def test_a_tombstone_still_answers_duplicate_and_conflict(trimming):
    """Within the dedup window a trimmed job still answers DUPLICATE and CONFLICT, changing nothing."""
    bus, probe = trimming
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"payload")
    [claim] = await bus.claim()
    await bus.complete(claim)
    await bus.sweep()
    probe.check()
    before = probe.snapshot()
    assert await bus.enqueue(job, lane="L", payload=b"payload") is Admission.DUPLICATE
    assert await bus.enqueue(job, lane="L", payload=b"other") is Admission.CONFLICT
    assert await bus.enqueue(job, lane="M", payload=b"payload") is Admission.CONFLICT
    probe.check()
    probe.assert_unchanged(before, duplicate=1, conflict=2)
    assert await bus.complete(claim) is Finish.DONE  # the tombstone still tells this claim finished it
    probe.assert_unchanged(before, duplicate=1, conflict=2)


async def test_without_a_dedup_window_a_trimmed_row_is_gone(watched_bus):
    """With a dedup window of 0 the trim deletes the row, and the same id is then admitted anew."""
    bus, probe = watched_bus(result_ttl_ms=0, dedup_window_ms=0)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    await bus.complete(claim)
    assert (await bus.sweep()).trimmed == 1
    assert probe.check() == {}
    with pytest.raises(UnknownJob):
        await bus.inspect(job)
    assert await bus.enqueue(job, lane="L", payload=b"") is Admission.ADMITTED
    assert probe.check() == {job: "queued"}


async def test_dead_rows_are_kept_whole_for_the_dead_ttl_whatever_the_result_ttl(trimming):
    """Dead-lettered jobs stay whole in dead (for inspection and retry) until their own dead ttl."""
    bus, probe = trimming
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p")
    [claim] = await bus.claim()
    await bus.fail(claim, "boom", retryable=False)
    assert (await bus.sweep()).trimmed == 0
    assert probe.check() == {job: "dead"}
    assert probe.row(job)["payload"] == b"p"


async def test_a_dead_row_past_the_dead_ttl_is_trimmed_and_cannot_be_retried(watched_bus):
    """Past the dead ttl a dead row leaves dead as a tombstone that still absorbs duplicates, and
    retry_dead refuses it (its payload is gone)."""
    bus, probe = watched_bus(dead_ttl_ms=0, dedup_window_ms=600_000)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p")
    [claim] = await bus.claim()
    await bus.fail(claim, "boom", retryable=False)
    assert (await bus.sweep()).trimmed == 1
    assert probe.members("dead") == {}
    assert probe.check() == {job: "dead"}
    assert probe.row(job) == {}
    assert await bus.enqueue(job, lane="L", payload=b"p") is Admission.DUPLICATE
    assert await bus.retry_dead(job) is False
    assert probe.check() == {job: "dead"}


async def test_a_sweep_on_an_empty_bus_reports_nothing(bus, probe):
    """A sweep of an empty bus moves nothing and reports no next due time."""
    report = await bus.sweep()
    assert (report.promoted, report.reclaimed, report.dead, report.trimmed) == (0, 0, 0, 0)
    assert report.next_due_ms is None
    assert report.swept is True
    assert probe.check() == {}


def _has_pexpiretime(probe: Probe) -> bool:
    """PEXPIRETIME exists from Redis 7.0; the suite also runs on 6.2."""
    return int(probe.client.info("server")["redis_version"].split(".")[0]) >= 7
