"""flow.lua and the gates of claim.lua (echomq.flow): pause, lane caps and rate limits, on the server."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from echomq import Finish, InvalidLane, InvalidOption, NewJob, Rate, SyncBus, Worker, ids
from tests.support.workers import eventually, running


async def fill(bus, lanes: dict[str, int]) -> dict[str, list[str]]:
    minted = {lane: [ids.mint("JOB") for _ in range(n)] for lane, n in lanes.items()}
    await bus.enqueue_many([NewJob(job, lane, b"") for lane, jobs in minted.items() for job in jobs])
    return minted


async def test_a_paused_bus_claims_nothing_and_resume_serves_it_again(bus, probe):
    """Pause: claims take nothing while producers still enqueue; resume: the same jobs, in order."""
    minted = await fill(bus, {"A": 2})
    await bus.pause()
    assert await bus.claim(count=5) == []
    late = ids.mint("JOB")
    await bus.enqueue(late, lane="A", payload=b"")
    assert (await bus.flow_settings()).paused
    await bus.resume()
    assert [c.job for c in await bus.claim(count=5)] == [*minted["A"], late]
    assert not (await bus.flow_settings()).paused


async def test_a_paused_lane_leaves_the_rotation_and_the_others_are_served(bus, probe):
    """A paused lane's jobs wait (counted in stats' queued), the other lanes go on; resume puts it back."""
    minted = await fill(bus, {"A": 2, "B": 2})
    await bus.pause("A")
    assert probe.ring() == ["B"]
    assert (await bus.stats()).queued == 4
    assert {c.job for c in await bus.claim(count=5)} == set(minted["B"])
    extra = ids.mint("JOB")
    await bus.enqueue(extra, lane="A", payload=b"")  # a paused lane does not come back by an enqueue
    assert probe.ring() == []
    await bus.resume("A")
    assert [c.job for c in await bus.claim(count=5)] == [*minted["A"], extra]


async def test_a_lane_cap_bounds_its_active_jobs_and_a_finish_reopens_it(bus, probe):
    """Cap 2: however many claims, at most two jobs of the lane are active; each finish frees one place, and
    the uncapped lane is served all along."""
    minted = await fill(bus, {"A": 6, "B": 3})
    await bus.set_lane_cap("A", 2)
    claims = await bus.claim(count=10)
    assert Counter(c.lane for c in claims) == {"A": 2, "B": 3}
    assert await bus.claim(count=10) == []
    assert probe.client.hget(bus.keys.lane_active, "A") == b"2"
    first = next(c for c in claims if c.lane == "A")
    assert await bus.complete(first, b"") is Finish.DONE
    [next_claim] = await bus.claim(count=10)
    assert next_claim.job == minted["A"][2]
    assert await bus.claim(count=10) == []


@pytest.mark.parametrize("ending", ["complete", "fail", "release", "sweep", "revoke"])
async def test_every_way_out_of_active_frees_the_place(bus, probe, ending):
    """Complete, fail, release, a reclaimed lease and a revoke each uncount the job and reopen its lane."""
    minted = await fill(bus, {"A": 3})
    await bus.set_lane_cap("A", 1)
    [claim] = await bus.claim(count=5)
    assert await bus.claim(count=5) == []
    if ending == "complete":
        await bus.complete(claim, b"")
    elif ending == "fail":
        await bus.fail(claim, "x", delay_ms=0)
    elif ending == "release":
        await bus.release(claim)
    elif ending == "sweep":
        probe.expire(claim.job)
        await bus.sweep()
    else:
        await bus.revoke(claim.job)
    [again] = await bus.claim(count=5)
    expected = minted["A"][0] if ending in ("fail", "release", "sweep") else minted["A"][1]
    assert again.job == expected
    assert probe.client.hget(bus.keys.lane_active, "A") == b"1"


async def test_a_cap_set_on_running_jobs_counts_them_and_clearing_it_reopens(bus, probe):
    """Setting a cap counts the jobs already active; clearing it puts a held lane back at once."""
    await fill(bus, {"A": 5})
    claims = await bus.claim(count=3)
    await bus.set_lane_cap("A", 2)
    assert probe.client.hget(bus.keys.lane_active, "A") == b"3"
    assert await bus.claim(count=5) == []
    await bus.set_lane_cap("A", None)
    assert len(await bus.claim(count=5)) == 2
    for claim in claims:
        await bus.complete(claim, b"")


async def test_the_star_cap_applies_to_every_lane_without_its_own(bus, probe):
    await fill(bus, {"A": 4, "B": 4, "C": 4})
    await bus.set_lane_cap("*", 1)
    await bus.set_lane_cap("C", 3)
    claims = await bus.claim(count=20)
    assert Counter(c.lane for c in claims) == {"A": 1, "B": 1, "C": 3}


async def test_fairness_holds_among_the_open_lanes_under_caps(bus, probe):
    """With a cap on a heavy lane, claims rotate over the open lanes: every lane with work is served
    within one round of the ring, and the recorded lag stays below the number of lanes."""
    await fill(bus, {"heavy": 50, **{f"l{i}": 5 for i in range(5)}})
    await bus.set_lane_cap("heavy", 2)
    served: list[str] = []
    while True:
        claims = await bus.claim(count=1)
        if not claims:
            break
        served.append(claims[0].lane)
        if claims[0].lane == "heavy" and served.count("heavy") % 2 == 0:
            await bus.complete(claims[0], b"")  # free a place now and then
    first_round = served[:6]
    assert set(first_round) == {"heavy", *(f"l{i}" for i in range(5))}
    assert probe.counters()["lag_max"] < 6


async def test_a_lane_rate_limit_admits_n_claims_per_window_on_the_server_clock(bus, probe):
    """Rate 3 per minute on lane A: three claims, then A is throttled while B is served; its window
    shows exactly the three claims."""
    await fill(bus, {"A": 10, "B": 2})
    await bus.set_rate_limit(Rate(3, 60_000), lane="A")
    claims = await bus.claim(count=20)
    assert Counter(c.lane for c in claims) == {"A": 3, "B": 2}
    assert await bus.claim(count=20) == []
    assert probe.client.zcard(f"{bus.keys.prefix}rate:A") == 3
    assert probe.client.zscore(bus.keys.throttled, "A") is not None


async def test_a_throttled_lane_returns_when_its_window_frees_a_claim(bus, probe):
    """Simulated time: the window's claims moved into the past, the next claim (or sweep) reopens it."""
    await fill(bus, {"A": 5})
    await bus.set_rate_limit(Rate(2, 60_000), lane="A")
    assert len(await bus.claim(count=5)) == 2
    claimed = await bus.claim_batch(count=5)
    assert claimed.jobs == []
    assert claimed.next_due_ms is not None
    assert claimed.next_due_ms > claimed.server_ms
    window = f"{bus.keys.prefix}rate:A"
    for member in probe.client.zrange(window, 0, -1):
        probe.client.zadd(window, {member: 0})
    probe.client.zadd(bus.keys.throttled, {"A": 0})
    assert (await bus.sweep()).next_due_ms is None
    assert probe.ring() == ["A"]
    assert len(await bus.claim(count=5)) == 2


async def test_the_bus_rate_limit_stops_a_claim_and_names_when_it_frees(bus, probe):
    """Rate 4 per minute on the bus: four claims over every lane, then none; no wake token is passed on
    (idle workers must not spin), and next_due says when the window frees a claim."""
    await fill(bus, {"A": 5, "B": 5})
    await bus.set_rate_limit(Rate(4, 60_000))
    probe.client.delete(bus.keys.wake)
    first = await bus.claim_batch(count=10)
    assert len(first.jobs) == 4
    second = await bus.claim_batch(count=10)
    assert second.jobs == []
    assert second.next_due_ms is not None
    assert second.next_due_ms > second.server_ms
    assert probe.client.llen(bus.keys.wake) == 0
    await bus.set_rate_limit(None)
    assert len(await bus.claim(count=10)) == 6


async def test_workers_under_a_rate_limit_and_a_cap_finish_everything(bus, probe):
    """Real workers, rate 20 per 500 ms on the bus and cap 1 on one lane: every job completes once, the
    capped lane never ran two at once, and no window ever held more than its count."""
    minted = await fill(bus, {"A": 15, "B": 15, "C": 15})
    await bus.set_rate_limit(Rate(20, 500))
    await bus.set_lane_cap("A", 1)
    running_a, peak = 0, 0

    async def handler(job):
        nonlocal running_a, peak
        if job.lane == "A":
            running_a += 1
            peak = max(peak, running_a)
        await asyncio.sleep(0.01)
        if job.lane == "A":
            running_a -= 1
        return b""

    workers = [Worker(bus, handler, concurrency=5, lease_ms=5000) for _ in range(2)]
    async with running(workers[0]), running(workers[1]):
        await eventually(lambda: probe.counters().get("completed", 0) == 45, timeout=30)
    assert peak == 1
    states = probe.check()
    assert all(states[j] == "done" for jobs in minted.values() for j in jobs)
    claimed_at = sorted(int(probe.row(j)["claimed_at"]) for jobs in minted.values() for j in jobs)
    for i, start in enumerate(claimed_at):
        window = [t for t in claimed_at[i:] if t < start + 500]
        assert len(window) <= 20


async def test_rate_limit_and_sweep_race_loses_no_job(bus, probe):
    """Leases reaped by the sweep while the lane is throttled: every job is still queued, active or done,
    and all finish once the window frees."""
    minted = await fill(bus, {"A": 6})
    await bus.set_rate_limit(Rate(3, 60_000), lane="A")
    claims = await bus.claim(count=10)
    for claim in claims:
        probe.expire(claim.job)
    await bus.sweep()
    assert set(probe.lane("A")) == set(minted["A"])
    await bus.set_rate_limit(None, lane="A")
    done = 0
    while claims := await bus.claim(count=10):
        for claim in claims:
            done += await bus.complete(claim, b"") is Finish.DONE
    assert done == 6


def test_the_sync_bus_sets_every_gate(redis_server, tag):
    with SyncBus.from_url(redis_server.url, tag=tag) as sync:
        sync.pause()
        sync.pause("A")
        sync.set_lane_cap("B", 3)
        sync.set_rate_limit(Rate(5, 1000), lane="*")
        sync.set_rate_limit(Rate(50, 1000))
        settings = sync.flow_settings()
        assert settings.paused
        assert settings.paused_lanes == {"A"}
        assert settings.caps == {"B": 3}
        assert settings.rates == {"*": Rate(5, 1000)}
        assert settings.rate == Rate(50, 1000)
        sync.resume()
        sync.resume("A")
        sync.set_lane_cap("B", None)
        sync.set_rate_limit(None, lane="*")
        sync.set_rate_limit(None)
        assert sync.redis.exists(sync.keys.flow) == 0
        assert sync.redis.hget(sync.keys.stats, "flow_gates") is None


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda bus: bus.set_lane_cap("A", 0), InvalidOption),
        (lambda bus: bus.set_lane_cap("bad lane", 2), InvalidLane),
        (lambda bus: bus.set_lane_cap(None, 2), InvalidOption),
        (lambda bus: bus.pause("*"), InvalidLane),
        (lambda bus: bus.set_rate_limit((3, 100)), InvalidOption),
        (lambda bus: bus.set_rate_limit(Rate(3, 100), lane="x y"), InvalidLane),
    ],
)
async def test_bad_settings_are_refused_and_change_nothing(bus, probe, call, error):
    with pytest.raises(error):
        await call(bus)
    assert probe.client.exists(bus.keys.flow) == 0


def test_a_rate_is_checked():
    for count, per_ms in ((0, 10), (1, 0), (True, 10), (10**6, 10)):
        with pytest.raises(InvalidOption):
            Rate(count, per_ms)
