"""release.lua through echomq.finish.release: hand a claimed job back at once, the try not counted."""

from __future__ import annotations

import dataclasses

import pytest

from echomq import Failure, Finish, InvalidLane, Lease, NewJob, Release, ids


async def test_release_returns_the_job_to_its_mint_position(bus, probe):
    """A released job is queued again ahead of the jobs minted after it, and the ring holds its lane once."""
    minted = [ids.mint("JOB") for _ in range(3)]
    await bus.enqueue_many([NewJob(job, "L", b"") for job in minted])
    [claim] = await bus.claim()
    assert claim.job == minted[0]
    assert probe.lane("L") == minted[1:]
    probe.check()
    assert await bus.release(claim) is Release.RELEASED
    assert probe.lane("L") == minted
    assert probe.ring() == ["L"]
    assert probe.check() == dict.fromkeys(minted, "queued")
    assert probe.counters()["released"] == 1


async def test_release_does_not_count_the_try_but_keeps_the_token(bus, probe):
    """A release gives the try back but attempts keeps counting, so each re-claim gets a new token."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", max_attempts=2)
    for token in (1, 2, 3, 4):
        [claim] = await bus.claim()
        assert (claim.token, claim.tries) == (token, 1)
        probe.check()
        await bus.release(claim)
        row = probe.row(job)
        assert (row["attempts"], row["tries"]) == (str(token).encode(), b"0")
        assert "deadline" not in row
        probe.check()
    [claim] = await bus.claim()
    assert await bus.fail(claim, "boom", delay_ms=0) is Failure.RETRYING  # 1 try used of 2
    probe.check()


async def test_the_releasing_worker_cannot_finish_the_job_later(bus, probe):
    """A release gives the job up: the old token is STALE for complete and REVOKED for extend (a second
    release of it, a retry, is told RELEASED and changes nothing)."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    await bus.release(claim)
    before = probe.snapshot()
    assert await bus.complete(claim) is Finish.STALE
    assert await bus.extend(claim, 60_000) is Lease.REVOKED
    assert await bus.release(claim) is Release.RELEASED
    assert probe.check() == {job: "queued"}
    probe.assert_unchanged(before, stale=1, revoked=1)
    [again] = await bus.claim()
    assert await bus.complete(claim) is Finish.STALE
    assert await bus.complete(again) is Finish.DONE
    probe.check()


async def test_a_stale_release_changes_nothing(bus, probe):
    """A release under a token that no longer holds the job is STALE; the new owner keeps it."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [first] = await bus.claim()
    probe.expire(job)  # simulates the lease running out
    await bus.sweep()
    [second] = await bus.claim()
    before = probe.snapshot()
    assert await bus.release(first) is Release.STALE
    assert probe.check() == {job: "active"}
    probe.assert_unchanged(before, stale=1)
    assert await bus.release(second) is Release.RELEASED
    probe.check()


async def test_release_into_an_emptied_lane_puts_the_lane_back_in_the_ring(bus, probe):
    """Releasing the only job of a lane makes that lane serviceable again at the ring's right end."""
    a, b = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(a, lane="A", payload=b"")
    await bus.enqueue(b, lane="B", payload=b"")
    [claim] = await bus.claim()
    assert claim.job == a
    assert probe.ring() == ["B"]
    await bus.release(claim)
    assert probe.ring() == ["B", "A"]
    probe.check()
    assert [c.job for c in await bus.claim(count=2)] == [b, a]
    probe.check()


async def test_release_keeps_the_priority(bus, probe):
    """A released job goes back at its priority, ahead of lower-priority work."""
    urgent, normal = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(urgent, lane="L", payload=b"", priority=-1)
    [claim] = await bus.claim()
    await bus.enqueue(normal, lane="L", payload=b"")
    await bus.release(claim)
    assert probe.lane("L") == [urgent, normal]
    probe.check()


async def test_release_with_a_claim_naming_another_lane_is_refused(bus, probe):
    """A claim naming another lane than the job's is refused as InvalidLane and changes nothing."""
    await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"")
    [claim] = await bus.claim()
    before = probe.snapshot()
    with pytest.raises(InvalidLane, match="which is 'L'"):
        await bus.release(dataclasses.replace(claim, lane="M"))
    probe.check()
    probe.assert_unchanged(before)
