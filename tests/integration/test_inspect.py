"""echomq.jobs.inspect: a job's row and the key that holds it, in every state; read-only."""

from __future__ import annotations

import pytest

from echomq import JobState, UnknownJob, ids


async def test_inspect_follows_a_job_through_its_states(bus, probe):
    """inspect names the state and the location key of a job as it moves queued -> active -> done."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess", max_attempts=3, priority=-2)
    info = await bus.inspect(job)
    assert (info.job, info.state, info.lane, info.location) == (
        job,
        JobState.QUEUED,
        "PLR1",
        bus.keys.lane("PLR1"),
    )
    assert (info.attempts, info.tries, info.max_attempts, info.priority) == (0, 0, 3, -2)
    assert info.payload == b"guess"
    assert info.created_ms is not None
    assert (info.deadline_ms, info.finished_ms, info.late_ms, info.result, info.error, info.trimmed) == (
        None, None, None, None, None, False,
    )  # fmt: skip

    [claim] = await bus.claim(owner="w1")
    info = await bus.inspect(job)
    assert (info.state, info.location, info.owner) == (JobState.ACTIVE, bus.keys.active, "w1")
    assert (info.attempts, info.tries, info.deadline_ms) == (1, 1, claim.deadline_ms)

    await bus.complete(claim, b"score")
    info = await bus.inspect(job)
    assert (info.state, info.location, info.result) == (JobState.DONE, bus.keys.done, b"score")
    assert info.finished_ms == int(probe.members("done")[job])
    assert info.deadline_ms is None


async def test_inspect_shows_delayed_and_dead_jobs_with_their_error(bus, probe):
    """A delayed job is located in delayed; a dead one in dead, with the last error."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", delay_ms=60_000)
    assert (await bus.inspect(job)).location == bus.keys.delayed
    probe.make_due(job)  # simulates the delay passing
    await bus.sweep()
    [claim] = await bus.claim()
    await bus.fail(claim, "no such round", retryable=False)
    info = await bus.inspect(job)
    assert (info.state, info.location, info.error) == (JobState.DEAD, bus.keys.dead, "no such round")


async def test_inspect_tells_how_late_a_delayed_job_started(bus, probe):
    """A job promoted from delayed records, at the claim that starts it, the ms from its due time to
    that claim (server clock); a job that was never delayed has no lateness."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", delay_ms=60_000)
    due = probe.now_ms() - 5_000
    probe.client.zadd(bus.keys.delayed, {job: due}, xx=True)  # simulates its due time 5 s ago
    await bus.sweep()
    assert (await bus.inspect(job)).late_ms is None  # promoted, not started yet
    assert len(await bus.claim()) == 1
    late = (await bus.inspect(job)).late_ms
    assert late is not None
    assert 5_000 <= late <= probe.now_ms() - due


async def test_inspect_changes_nothing(bus, probe):
    """inspect only reads: the keys are the same before and after."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    await bus.claim()
    before = probe.snapshot()
    await bus.inspect(job)
    probe.assert_unchanged(before)


async def test_inspect_of_an_unknown_job_raises(bus, probe):
    """inspect raises UnknownJob for a well-formed id that was never admitted."""
    with pytest.raises(UnknownJob, match="never admitted"):
        await bus.inspect(ids.mint("JOB"))
