"""claim.lua through echomq.lanes.claim: lane head to active in one step, rotating fairly over lanes."""

from __future__ import annotations

import pytest

from echomq import InvalidOption, NewJob, ids, lanes


async def _fill(bus, lanes: dict[str, int]) -> dict[str, list[str]]:
    """Enqueue the given number of jobs per lane, lane by lane in dict order; return the ids."""
    out: dict[str, list[str]] = {}
    for lane, n in lanes.items():
        out[lane] = [ids.mint("JOB") for _ in range(n)]
        await bus.enqueue_many([NewJob(job, lane, job.encode()) for job in out[lane]])
    return out


async def test_claim_moves_the_lane_head_to_active(bus, probe):
    """A claim makes the head active under token 1, leased to server TIME + lease, owned by the caller."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess", max_attempts=4)
    before_ms = probe.now_ms()
    claimed = await bus.claim_batch(count=1, lease_ms=5_000, owner="worker-1")
    after_ms = probe.now_ms()
    [claim] = claimed.jobs
    assert (claim.job, claim.lane, claim.token, claim.payload) == (job, "PLR1", 1, b"guess")
    assert (claim.tries, claim.max_attempts) == (1, 4)
    assert before_ms <= claimed.server_ms <= after_ms
    assert claim.deadline_ms == claimed.server_ms + 5_000
    assert probe.check() == {job: "active"}
    assert probe.members("active") == {job: claim.deadline_ms}
    row = probe.row(job)
    assert (row["state"], row["attempts"], row["tries"]) == (b"active", b"1", b"1")
    assert row["owner"] == b"worker-1"
    assert int(row["deadline"]) == claim.deadline_ms
    assert probe.lane("PLR1") == []
    assert probe.ring() == []
    assert probe.counters()["claimed"] == 1


async def test_claim_on_an_empty_bus_returns_nothing(bus, probe):
    """A claim with nothing queued returns no jobs, the server time, and no next due time."""
    claimed = await bus.claim_batch(count=5)
    assert claimed.jobs == []
    assert claimed.server_ms > 0
    assert claimed.next_due_ms is None
    assert probe.check() == {}
    assert "claimed" not in probe.counters()


async def test_claim_reports_the_next_due_delayed_job(bus, probe):
    """A claim tells the caller when the earliest delayed job is due, so it can sleep until then."""
    later, sooner = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(later, lane="L", payload=b"", delay_ms=120_000)
    await bus.enqueue(sooner, lane="L", payload=b"", delay_ms=60_000)
    claimed = await bus.claim_batch()
    assert claimed.jobs == []
    assert claimed.next_due_ms == probe.members("delayed")[sooner]
    assert probe.check() == {later: "delayed", sooner: "delayed"}


async def test_a_lane_is_served_by_priority_then_mint_order(bus, probe):
    """Within a lane the lowest priority is claimed first, and equal priorities in mint order."""
    minted = [ids.mint("JOB") for _ in range(6)]
    priorities = [5, 0, 0, -1, 5, 0]
    for job, priority in reversed(list(zip(minted, priorities, strict=True))):  # enqueue order is irrelevant
        await bus.enqueue(job, lane="L", payload=b"", priority=priority)
        probe.check()
    expected = [minted[3], minted[1], minted[2], minted[5], minted[0], minted[4]]
    assert probe.lane("L") == expected
    got = []
    for _ in expected:
        [claim] = await bus.claim()
        got.append(claim.job)
        probe.check()
    assert got == expected


async def test_single_claims_rotate_over_the_lanes(bus, probe):
    """Successive claims take one job per lane in ring order; an emptied lane leaves the ring."""
    jobs = await _fill(bus, {"A": 3, "B": 1, "C": 2})
    assert probe.ring() == ["A", "B", "C"]
    steps = [
        (jobs["A"][0], ["B", "C", "A"]),
        (jobs["B"][0], ["C", "A"]),
        (jobs["C"][0], ["A", "C"]),
        (jobs["A"][1], ["C", "A"]),
        (jobs["C"][1], ["A"]),
        (jobs["A"][2], []),
    ]
    for expected_job, expected_ring in steps:
        [claim] = await bus.claim()
        assert claim.job == expected_job
        assert probe.ring() == expected_ring
        probe.check()
    assert await bus.claim() == []


async def test_a_batch_claim_takes_the_same_rotation(bus, probe):
    """A batch claim of N jobs returns what N single claims would, in the same order."""
    jobs = await _fill(bus, {"A": 3, "B": 1, "C": 2})
    expected = [jobs["A"][0], jobs["B"][0], jobs["C"][0], jobs["A"][1], jobs["C"][1], jobs["A"][2]]
    first = await bus.claim(count=4)
    assert [c.job for c in first] == expected[:4]
    assert probe.ring() == ["C", "A"]
    probe.check()
    second = await bus.claim(count=10)
    assert [c.job for c in second] == expected[4:]
    assert probe.ring() == []
    states = probe.check()
    assert set(states.values()) == {"active"}
    assert probe.counters()["claimed"] == 6


async def test_a_batch_claim_continues_the_rotation_where_it_stopped(bus, probe):
    """The ring position persists across calls, so batches of any size interleave lanes fairly."""
    jobs = await _fill(bus, {"A": 4, "B": 4})
    got = [c.job for c in await bus.claim(count=3)]
    probe.check()
    got += [c.job for c in await bus.claim(count=1)]
    probe.check()
    got += [c.job for c in await bus.claim(count=4)]
    probe.check()
    assert got == [job for pair in zip(jobs["A"], jobs["B"], strict=True) for job in pair]


async def test_the_attempts_token_increments_on_every_claim(bus, probe):
    """Each claim of the same job hands out the next attempts token and counts one more try."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", max_attempts=5)
    for expected in (1, 2, 3):
        [claim] = await bus.claim()
        assert (claim.job, claim.token, claim.tries) == (job, expected, expected)
        assert probe.check() == {job: "active"}
        probe.expire(job)  # simulates the lease running out
        assert (await bus.sweep()).reclaimed == 1
        assert probe.check() == {job: "queued"}
    assert probe.row(job)["attempts"] == b"3"


async def test_an_emptied_lane_rejoins_the_ring_at_its_right_end(bus, probe):
    """A lane that left the ring when emptied joins again behind the lanes still waiting."""
    jobs = await _fill(bus, {"A": 1, "B": 2})
    [claim] = await bus.claim()
    assert claim.job == jobs["A"][0]
    assert probe.ring() == ["B"]
    probe.check()
    again = ids.mint("JOB")
    await bus.enqueue(again, lane="A", payload=b"")
    assert probe.ring() == ["B", "A"]
    probe.check()
    assert [c.job for c in await bus.claim(count=3)] == [jobs["B"][0], again, jobs["B"][1]]
    probe.check()


async def test_claim_does_not_take_delayed_jobs(bus, probe):
    """Jobs in delayed are not claimable, whatever their lane."""
    now, later = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(later, lane="L", payload=b"", delay_ms=60_000)
    await bus.enqueue(now, lane="L", payload=b"")
    assert [c.job for c in await bus.claim(count=5)] == [now]
    assert probe.check() == {now: "active", later: "delayed"}


async def test_claim_clears_wake_tokens_when_nothing_is_left(bus, probe):
    """A claim that leaves the ring empty deletes the wake tokens, so idle workers block again."""
    await _fill(bus, {"A": 2})
    assert probe.wake_tokens() == 2
    await bus.claim()
    assert probe.wake_tokens() == 2
    probe.check()
    await bus.claim()
    assert probe.wake_tokens() == 0
    probe.check()


async def test_a_claim_that_leaves_jobs_behind_passes_a_wake_token_on(bus, probe):
    """A claim that leaves jobs in the lanes pushes a wake token when none is left (for the next idle
    worker), never a second one; the claim that empties the lanes deletes it."""
    await _fill(bus, {"A": 3, "B": 1})
    probe.client.delete(bus.keys.wake)  # the tokens went to workers that are busy now
    await bus.claim(count=2)
    assert probe.wake_tokens() == 1
    await bus.claim(count=1)
    assert probe.wake_tokens() == 1
    probe.check()
    assert len(await bus.claim(count=5)) == 1
    assert probe.wake_tokens() == 0
    probe.check()


async def test_the_claim_of_a_promoted_job_records_how_late_it_started(bus, probe):
    """A job promoted from delayed keeps its due time until its next claim, which records the ms from
    that due time to the claim (server clock) as 'late'; a later claim (a redelivery) leaves it alone."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", delay_ms=60_000)
    due = probe.now_ms() - 250
    probe.client.zadd(bus.keys.delayed, {job: due}, xx=True)  # simulates its delay passing 250 ms ago
    assert (await bus.sweep()).promoted == 1
    assert probe.field(job, "due") == str(due)
    await bus.claim()
    row = probe.row(job)
    assert "due" not in row
    assert int(row["late"]) == int(row["claimed_at"]) - due >= 250
    probe.expire(job)  # simulates the lease running out: the job is redelivered
    assert (await bus.sweep()).reclaimed == 1
    await bus.claim()
    assert probe.row(job)["late"] == row["late"]
    probe.check()


async def test_claim_skips_and_removes_an_empty_lane_left_in_the_ring(bus, probe):
    """A lane name in the ring with no jobs (a foreign write) is dropped, and the claim goes on."""
    jobs = await _fill(bus, {"A": 1})
    probe.client.lpush(bus.keys.ring, "ghost")
    [claim] = await bus.claim()
    assert claim.job == jobs["A"][0]
    assert probe.ring() == []
    assert probe.check() == {claim.job: "active"}


async def test_owner_is_recorded_and_defaults_to_empty(bus, probe):
    """The claim's owner text is stored on the row; without one it is empty."""
    jobs = await _fill(bus, {"A": 2})
    await bus.claim()
    await bus.claim(owner="host:1234")
    assert probe.row(jobs["A"][0])["owner"] == b""
    assert probe.row(jobs["A"][1])["owner"] == b"host:1234"
    probe.check()


async def test_a_claim_retried_with_its_request_id_gets_the_same_jobs_and_spends_no_try(bus, probe):
    """A claim retried with its request id (its reply was lost) gets the same jobs under the same tokens
    and tries, leases renewed, and claims nothing new; only the 'replayed' counter moves."""
    jobs = await _fill(bus, {"A": 2, "B": 1})
    first = await bus.claim_batch(count=2, lease_ms=5_000, request="req-1")
    assert [c.job for c in first.jobs] == [jobs["A"][0], jobs["B"][0]]
    again = await bus.claim_batch(count=3, lease_ms=60_000, request="req-1")
    assert [(c.job, c.lane, c.token, c.tries, c.payload) for c in again.jobs] == [
        (c.job, c.lane, c.token, c.tries, c.payload) for c in first.jobs
    ]
    assert all(c.deadline_ms == again.server_ms + 60_000 for c in again.jobs)
    assert probe.members("active") == {c.job: c.deadline_ms for c in again.jobs}
    assert probe.lane("A") == [jobs["A"][1]]  # not claimed by the retry
    counters = probe.counters()
    assert (counters["claimed"], counters["replayed"]) == (2, 2)
    assert [probe.row(c.job)["tries"] for c in again.jobs] == [b"1", b"1"]
    probe.check()


async def test_a_retried_claim_gets_only_the_jobs_it_still_holds(bus, probe):
    """A retried claim leaves out a job that left active since (finished, or reaped and re-claimed)."""
    jobs = await _fill(bus, {"A": 1, "B": 1, "C": 1})
    first = await bus.claim(count=3, lease_ms=60_000, request="req-2")
    done, reaped, held = first
    await bus.complete(done)
    probe.expire(reaped.job)  # simulates its lease running out
    await bus.sweep()
    [other] = await bus.claim(request="someone-else")
    assert (other.job, other.token) == (reaped.job, 2)
    again = await bus.claim(count=3, request="req-2")
    assert [(c.job, c.token) for c in again] == [(held.job, held.token)]
    assert probe.check() == {jobs["A"][0]: "done", jobs["B"][0]: "active", jobs["C"][0]: "active"}


async def test_a_claim_that_got_nothing_is_retried_as_a_new_claim(bus, probe):
    """A claim that found nothing records nothing, so its retry claims what is there now."""
    assert await bus.claim(request="req-3") == []
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim(request="req-3")
    assert (claim.job, claim.token) == (job, 1)
    assert probe.counters().get("replayed", 0) == 0


async def test_a_claim_records_its_jobs_for_one_lease(bus, probe):
    """The record of a claim that got jobs expires with its lease; without a request id none is kept."""
    await _fill(bus, {"A": 2})
    await bus.claim(lease_ms=5_000, request="req-4")
    record = bus.keys.claim_record("req-4")
    assert 0 < probe.client.pttl(record) <= 5_000
    keys, args = lanes.claim_call(bus, 1, 5_000, "", "")
    await bus.scripts.run("claim", keys, args)  # no request id (the benchmark's raw claims)
    assert [k.decode() for k in probe.client.scan_iter(match=f"{bus.keys.prefix}claim:*")] == [record]


async def test_an_ill_formed_request_id_is_refused_before_anything_is_sent(bus, probe):
    """A request id that is not 0-64 characters of [A-Za-z0-9_.:-] raises InvalidOption; nothing changes."""
    await _fill(bus, {"A": 1})
    before = probe.snapshot()
    for bad in ("has space", "x" * 65, "{tag}", 7):
        with pytest.raises(InvalidOption):
            await bus.claim(request=bad)
    probe.assert_unchanged(before)
