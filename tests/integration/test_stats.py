"""stats.lua through echomq.stats.read_stats: counters that match the outcomes, depths, fairness lag."""

from __future__ import annotations

import dataclasses

from echomq import NewJob, ids
from echomq.states import COUNTERS


async def test_an_empty_bus_has_zero_counters_and_depths(bus, probe):
    """Stats of an untouched bus: every counter is 0, every depth is 0, no lanes, and it writes nothing."""
    stats = await bus.stats()
    assert stats.counters == dict.fromkeys(COUNTERS, 0)
    assert (stats.queued, stats.delayed, stats.active, stats.done, stats.dead) == (0, 0, 0, 0, 0)
    assert (stats.lanes, stats.lanes_total, stats.lag_max) == ([], 0, 0)
    assert probe.snapshot() == {}


async def test_counters_equal_the_number_of_each_outcome(bus, probe):
    """After a scripted run, every counter equals the number of outcomes of its kind, and depths agree."""
    minted = [ids.mint("JOB") for _ in range(8)]
    admissions = await bus.enqueue_many(
        [NewJob(job, f"L{i % 3}", b"p", max_attempts=2) for i, job in enumerate(minted)]
    )
    assert len(admissions) == 8
    await bus.enqueue(minted[0], lane="L0", payload=b"p")  # duplicate
    await bus.enqueue(minted[1], lane="L1", payload=b"q")  # conflict
    await bus.enqueue(minted[2], lane="L2", payload=b"p")  # duplicate
    delayed = ids.mint("JOB")
    await bus.enqueue(delayed, lane="L0", payload=b"", delay_ms=60_000)
    probe.check()

    claims = await bus.claim(count=6, request="six")  # claimed 6
    again = await bus.claim(count=6, request="six")  # replayed 6 (a retry after a lost reply)
    assert [(c.job, c.token) for c in again] == [(c.job, c.token) for c in claims]
    done, extended, retried, dead_now, released, reaped = claims
    await bus.complete(done)  # completed 1
    await bus.complete(done)  # a retry: DONE again, no counter
    await bus.extend(extended, 60_000)  # extended 1
    await bus.fail(retried, "x", delay_ms=0)  # retried 1
    await bus.fail(dead_now, "x", retryable=False)  # dead 1
    await bus.release(released)  # released 1
    probe.expire(reaped.job)  # simulates the lease running out
    probe.make_due(delayed)  # simulates the delay passing
    await bus.sweep()  # reclaimed 1, promoted 1
    await bus.extend(reaped, 60_000)  # revoked 1
    await bus.complete(reaped)  # stale 1
    await bus.retry_dead(dead_now.job)  # resurrected 1
    probe.check()

    stats = await bus.stats()
    assert stats.counters == {
        "admitted": 9,
        "duplicate": 2,
        "conflict": 1,
        "claimed": 6,
        "replayed": 6,
        "completed": 1,
        "stale": 1,
        "retried": 1,
        "dead": 1,
        "reclaimed": 1,
        "released": 1,
        "extended": 1,
        "revoked": 1,
        "promoted": 1,
        "resurrected": 1,
        "trimmed": 0,
        "slot_moving": 0,  # no cluster slot is being resharded here
        "unrecorded": 0,  # every claim kept its record (no slot moving)
        "cancelled": 0,  # counted in tests/integration/test_control.py
        "revocations": 0,  # likewise
        "deleted": 0,  # counted in test_deleted_counts_each_dead_letter_deleted_once below
    }
    states = probe.check()
    assert stats.queued == sum(1 for s in states.values() if s == "queued") == 7
    assert (stats.delayed, stats.active, stats.done, stats.dead) == (0, 1, 1, 0)
    assert stats.lanes_total == len(probe.ring())
    assert sum(lane.depth for lane in stats.lanes) == stats.queued


async def test_dead_counts_both_failures_and_expired_last_tries(bus, probe):
    """The dead counter counts dead-letters from fail and from the sweep alike."""
    a, b = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue_many([NewJob(a, "A", b"", max_attempts=1), NewJob(b, "B", b"", max_attempts=1)])
    first, second = await bus.claim(count=2)
    await bus.fail(first, "x")
    probe.expire(second.job)  # simulates the lease running out
    await bus.sweep()
    stats = await bus.stats()
    assert (stats.counters["dead"], stats.dead) == (2, 2)
    probe.check()


async def test_lanes_are_listed_in_ring_order_with_their_depth(bus, probe):
    """Each waiting lane is listed in ring order with its queued depth; lanes= limits the detail only."""
    await bus.enqueue_many(
        [NewJob(ids.mint("JOB"), lane, b"") for lane, n in (("A", 3), ("B", 1), ("C", 2)) for _ in range(n)]
    )
    stats = await bus.stats()
    assert [(s.lane, s.depth) for s in stats.lanes] == [("A", 3), ("B", 1), ("C", 2)]
    assert (stats.lanes_total, stats.queued) == (3, 6)
    short = await bus.stats(lanes=2)
    assert [s.lane for s in short.lanes] == ["A", "B"]
    assert (short.lanes_total, short.queued) == (3, 6)
    none = await bus.stats(lanes=0)
    assert (none.lanes, none.lanes_total) == ([], 3)
    probe.check()


async def test_fairness_lag_counts_claims_since_the_lane_was_last_served(bus, probe):
    """A lane's lag is the number of claims served on the bus since that lane was last served."""
    await bus.enqueue_many(
        [NewJob(ids.mint("JOB"), lane, b"") for lane, n in (("A", 3), ("B", 1), ("C", 2)) for _ in range(n)]
    )

    async def lags() -> dict[str, int]:
        probe.check()
        return {s.lane: s.lag for s in (await bus.stats()).lanes}

    assert await lags() == {"A": 0, "B": 0, "C": 0}
    await bus.claim()  # A served
    assert await lags() == {"A": 0, "B": 1, "C": 1}
    await bus.claim()  # B served and emptied
    assert await lags() == {"A": 1, "C": 2}
    await bus.claim()  # C served
    assert await lags() == {"A": 2, "C": 0}
    await bus.claim()  # A served
    assert await lags() == {"A": 0, "C": 1}
    assert (await bus.stats()).lag_max == 2  # C waited 2 claims before its first service


async def test_fairness_lag_of_a_deep_single_lane_stays_zero(bus, probe):
    """A lane served claim after claim has no lag, however many jobs it holds."""
    await bus.enqueue_many([NewJob(ids.mint("JOB"), "A", b"") for _ in range(20)])
    for _ in range(10):
        await bus.claim()
        assert [(s.lane, s.lag) for s in (await bus.stats()).lanes] == [("A", 0)]
    await bus.claim(count=5)
    stats = await bus.stats()
    assert [(s.lane, s.lag) for s in stats.lanes] == [("A", 0)]
    assert stats.lag_max == 0
    probe.check()


async def test_a_lane_that_becomes_non_empty_starts_its_lag_at_that_claim(bus, probe):
    """A lane's lag starts when it gets its first job, not when the bus started."""
    await bus.enqueue_many([NewJob(ids.mint("JOB"), "A", b"") for _ in range(5)])
    await bus.claim(count=3)
    await bus.enqueue(ids.mint("JOB"), lane="B", payload=b"")
    assert {s.lane: s.lag for s in (await bus.stats()).lanes} == {"A": 0, "B": 0}
    await bus.claim()  # A served
    assert {s.lane: s.lag for s in (await bus.stats()).lanes} == {"A": 0, "B": 1}
    probe.check()


async def test_a_job_returning_ahead_of_a_waiting_lane_keeps_the_lane_lag(bus, probe):
    """A job released (or retried, reclaimed) to the head of a waiting lane does not reset that lane's lag."""
    a1, a2, b1, c1 = (ids.mint("JOB") for _ in range(4))
    await bus.enqueue_many([NewJob(a1, "A", b""), NewJob(a2, "A", b""), NewJob(b1, "B", b"")])
    await bus.enqueue(c1, lane="C", payload=b"")
    [first] = await bus.claim()  # A served: a1 active, a2 now heads A
    assert first.job == a1
    await bus.claim(count=2)  # B and C served and emptied
    assert {s.lane: s.lag for s in (await bus.stats()).lanes} == {"A": 2}
    await bus.release(first)  # a1 back ahead of a2
    assert probe.lane("A") == [a1, a2]
    assert {s.lane: s.lag for s in (await bus.stats()).lanes} == {"A": 2}

    [again] = await bus.claim()  # A served
    assert again.job == a1
    await bus.fail(again, "x", delay_ms=0)  # a1 back ahead of a2 once more
    assert {s.lane: s.lag for s in (await bus.stats()).lanes} == {"A": 0}
    probe.check()


async def test_lag_max_records_the_longest_wait_of_any_claim(bus, probe):
    """lag_max is the most claims any lane waited before it was served, a high-water mark."""
    lanes = [f"L{i}" for i in range(5)]
    await bus.enqueue_many([NewJob(ids.mint("JOB"), lane, b"") for lane in lanes for _ in range(2)])
    await bus.claim(count=10)
    stats = await bus.stats()
    assert stats.lag_max == 4  # with 5 lanes, a lane waits at most 4 claims
    assert stats.counters["claimed"] == 10
    probe.check()


async def test_as_dict_is_the_documented_shape(bus, probe):
    """Stats.as_dict gives counters, depth per state, lanes with depth and lag, and lag_max."""
    await bus.enqueue(ids.mint("JOB"), lane="A", payload=b"")
    data = (await bus.stats()).as_dict()
    assert set(data) == {"counters", "depth", "lanes_total", "lanes", "lag_max"}
    assert data["depth"] == {"queued": 1, "delayed": 0, "active": 0, "done": 0, "dead": 0}
    assert data["lanes"] == [{"lane": "A", "depth": 1, "lag": 0}]
    assert dataclasses.is_dataclass(await bus.stats())
    probe.check()


async def test_reading_stats_changes_nothing(bus, probe):
    """stats.lua is read-only: a snapshot of the keys is the same before and after."""
    await bus.enqueue_many([NewJob(ids.mint("JOB"), "A", b"") for _ in range(3)])
    await bus.claim()
    before = probe.snapshot()
    await bus.stats(lanes=100)
    probe.assert_unchanged(before)


async def test_deleted_counts_each_dead_letter_deleted_once(bus, probe):
    """delete_dead counts 'deleted' once per dead letter: a repeated delete and a refused one count nothing,
    and the dead depth falls by the number deleted."""
    jobs = [ids.mint("JOB") for _ in range(3)]
    await bus.enqueue_many([NewJob(job, f"L{i}", b"", max_attempts=1) for i, job in enumerate(jobs)])
    for claim in await bus.claim(count=3):
        await bus.fail(claim, "x")
    live = ids.mint("JOB")
    await bus.enqueue(live, lane="L", payload=b"")
    await bus.delete_dead(jobs[0])
    await bus.delete_dead(jobs[0])  # ALREADY: not counted
    await bus.delete_dead(live)  # REFUSED: not counted
    await bus.delete_dead(jobs[1])
    stats = await bus.stats()
    assert (stats.counters["deleted"], stats.counters["dead"], stats.dead) == (2, 3, 1)
