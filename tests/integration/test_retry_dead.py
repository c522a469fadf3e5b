"""retry_dead.lua through echomq.dead: a dead job back to its lane with a fresh budget, once per request."""

from __future__ import annotations

import pytest

from echomq import Failure, Finish, InvalidId, UnknownJob, dead, ids


async def _dead(bus, probe, lane="L", max_attempts=2):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=b"p", max_attempts=max_attempts)
    claim = None
    for _ in range(max_attempts):
        [claim] = await bus.claim()
        await bus.fail(claim, "boom", delay_ms=0)
        probe.check()
    assert probe.check()[job] == "dead"
    return job, claim


async def test_retry_dead_returns_the_job_to_its_lane(bus, probe):
    """A dead job goes back to its lane queued, tries reset, attempts kept, lane back in the ring."""
    job, _ = await _dead(bus, probe)
    assert await bus.retry_dead(job) is True
    assert probe.check() == {job: "queued"}
    row = probe.row(job)
    assert (row["attempts"], row["tries"]) == (b"2", b"0")
    assert "finished" not in row
    assert probe.ring() == ["L"]
    assert probe.members("dead") == {}
    assert probe.counters()["resurrected"] == 1
    assert await bus.dead_jobs() == []


async def test_a_resurrected_job_has_a_fresh_budget_of_tries(bus, probe):
    """After retry_dead the job gets max attempts new tries, with tokens continuing upwards."""
    job, _ = await _dead(bus, probe, max_attempts=2)
    await bus.retry_dead(job)
    [claim] = await bus.claim()
    assert (claim.token, claim.tries) == (3, 1)
    assert await bus.fail(claim, "again", delay_ms=0) is Failure.RETRYING
    [claim] = await bus.claim()
    assert (claim.token, claim.tries) == (4, 2)
    assert await bus.fail(claim, "again", delay_ms=0) is Failure.DEAD
    probe.check()


async def test_the_last_claim_before_death_cannot_finish_the_resurrected_job(bus, probe):
    """The token of the claim that died is STALE after the job was retried and claimed again."""
    job, last = await _dead(bus, probe)
    await bus.retry_dead(job)
    [fresh] = await bus.claim()
    before = probe.snapshot()
    assert await bus.complete(last) is Finish.STALE
    probe.assert_unchanged(before, stale=1)
    assert await bus.complete(fresh) is Finish.DONE
    assert probe.check() == {job: "done"}


async def test_retry_dead_of_a_job_that_is_not_dead_changes_nothing(bus, probe):
    """retry_dead answers False for a queued, active or done job and writes nothing, not even a counter."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    for step in ("queued", "active", "done"):
        before = probe.snapshot()
        assert await bus.retry_dead(job) is False
        assert probe.check() == {job: step}
        probe.assert_unchanged(before)
        if step == "queued":
            [claim] = await bus.claim()
        elif step == "active":
            await bus.complete(claim)


async def test_retry_dead_twice_moves_the_job_once(bus, probe):
    """A second retry_dead of the same job answers False: it is queued already."""
    job, _ = await _dead(bus, probe)
    assert await bus.retry_dead(job) is True
    before = probe.snapshot()
    assert await bus.retry_dead(job) is False
    probe.assert_unchanged(before)
    assert probe.lane("L") == [job]


async def test_retry_dead_joins_a_waiting_lane_at_the_mint_position(bus, probe):
    """A retried job re-enters its lane ahead of later-minted jobs, and the lane stays in the ring once."""
    job, _ = await _dead(bus, probe)
    later = ids.mint("JOB")
    await bus.enqueue(later, lane="L", payload=b"")
    await bus.retry_dead(job)
    assert probe.lane("L") == [job, later]
    assert probe.ring() == ["L"]
    probe.check()


async def test_retry_dead_of_an_unknown_or_ill_formed_id_raises(bus, probe):
    """An id never admitted raises UnknownJob; an ill-formed one raises InvalidId; nothing changes."""
    await _dead(bus, probe)
    before = probe.snapshot()
    with pytest.raises(UnknownJob):
        await bus.retry_dead(ids.mint("JOB"))
    with pytest.raises(InvalidId):
        await bus.retry_dead("JOB-not-an-id")
    probe.assert_unchanged(before)


async def test_a_retried_call_answers_moved_and_never_moves_the_job_twice(bus, probe):
    """A call repeated under the same request id (a retry after a lost reply) answers that it moved the
    job, and moves nothing, even when a worker dead-lettered the job again in between."""
    job, _ = await _dead(bus, probe, max_attempts=1)
    request = dead.new_request()
    assert await dead.retry_dead_many(bus, [job], request) == [True]
    assert await dead.retry_dead_many(bus, [job], request) == [True]  # the lost reply's retry
    [claim] = await bus.claim()
    assert await bus.fail(claim, "boom again") is Failure.DEAD
    before = probe.snapshot()
    assert await dead.retry_dead_many(bus, [job], request) == [True]
    probe.assert_unchanged(before)
    assert probe.counters()["resurrected"] == 1
    assert await dead.retry_dead_many(bus, [job], dead.new_request()) == [True]  # another request moves it
    assert probe.check() == {job: "queued"}
    assert probe.counters()["resurrected"] == 2


async def test_retry_dead_many_answers_per_job(bus, probe):
    """One batch: a dead job moves (True); a queued one and an id with no row answer False."""
    gone, _ = await _dead(bus, probe, lane="A")
    queued = ids.mint("JOB")
    await bus.enqueue(queued, lane="B", payload=b"")
    never = ids.mint("JOB")
    assert await dead.retry_dead_many(bus, [gone, queued, never], dead.new_request()) == [True, False, False]
    assert probe.check() == {gone: "queued", queued: "queued"}


async def test_retry_all_dead_moves_a_snapshot_once_and_reports_what_moved(bus, probe):
    """retry_all_dead retries every dead job once, oldest death first, in batches, reports them, and
    leaves a wake token for each job it moved (as many idle workers wake)."""
    jobs = [(await _dead(bus, probe, lane=f"L{i}", max_attempts=1))[0] for i in range(5)]
    probe.client.zadd(bus.keys.dead, {"not-a-job-id": 0})  # a foreign entry is not retried
    probe.client.delete(bus.keys.wake)
    report = await bus.retry_all_dead(batch=2)
    assert report == dead.DeadRetry(listed=5, moved=tuple(jobs))
    assert probe.counters()["resurrected"] == 5
    assert probe.wake_tokens() == 5
    probe.client.zrem(bus.keys.dead, "not-a-job-id")
    assert set(probe.check().values()) == {"queued"}
    assert await bus.retry_all_dead() == dead.DeadRetry(listed=0, moved=())
