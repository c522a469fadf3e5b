"""complete.lua through echomq.finish.complete: active to done, fenced by the attempts token."""

from __future__ import annotations

import dataclasses

import pytest

from echomq import Finish, UnknownJob, ids


async def _claimed(bus, probe, **options):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p", **options)
    probe.check()
    [claim] = await bus.claim()
    assert probe.check() == {job: "active"}
    return claim


async def test_complete_moves_the_job_from_active_to_done(bus, probe):
    """A complete under the current token is DONE: the job is in done with its result and finish time."""
    claim = await _claimed(bus, probe)
    before_ms = probe.now_ms()
    assert await bus.complete(claim, result=b"score") is Finish.DONE
    after_ms = probe.now_ms()
    assert probe.check() == {claim.job: "done"}
    finished = probe.members("done")[claim.job]
    assert before_ms <= finished <= after_ms
    row = probe.row(claim.job)
    assert row["result"] == b"score"
    assert int(row["finished"]) == finished
    assert "deadline" not in row
    assert probe.members("active") == {}
    assert probe.counters()["completed"] == 1


async def test_the_result_defaults_to_empty(bus, probe):
    """A complete without a result stores an empty result."""
    claim = await _claimed(bus, probe)
    assert await bus.complete(claim) is Finish.DONE
    assert probe.row(claim.job)["result"] == b""
    probe.check()


async def test_a_second_complete_of_the_same_claim_is_done_and_changes_nothing(bus, probe):
    """Completing a job twice under one claim (a retry after a lost reply): the second answer is DONE
    (that claim finished it), and no key or counter moves."""
    claim = await _claimed(bus, probe)
    await bus.complete(claim, result=b"first")
    probe.check()
    before = probe.snapshot()
    assert await bus.complete(claim, result=b"second") is Finish.DONE
    probe.check()
    probe.assert_unchanged(before)
    assert probe.row(claim.job)["result"] == b"first"
    assert probe.counters()["completed"] == 1


async def test_a_reaped_and_reclaimed_job_refuses_the_old_token(bus, probe):
    """After the lease is reaped and the job re-claimed, the first worker's complete is STALE."""
    first = await _claimed(bus, probe)
    probe.expire(first.job)  # simulates the first worker's lease running out
    assert (await bus.sweep()).reclaimed == 1
    assert probe.check() == {first.job: "queued"}
    [second] = await bus.claim()
    assert (second.job, second.token) == (first.job, first.token + 1)
    assert probe.check() == {first.job: "active"}

    before = probe.snapshot()
    assert await bus.complete(first, result=b"late") is Finish.STALE
    probe.check()
    probe.assert_unchanged(before, stale=1)

    assert await bus.complete(second, result=b"fresh") is Finish.DONE
    assert probe.check() == {first.job: "done"}
    assert probe.row(first.job)["result"] == b"fresh"
    assert probe.counters()["completed"] == 1


async def test_a_reaped_job_refuses_the_old_token_before_it_is_reclaimed(bus, probe):
    """A job back in its lane after a reap cannot be completed by the worker that lost it."""
    claim = await _claimed(bus, probe)
    probe.expire(claim.job)  # simulates the lease running out
    await bus.sweep()
    assert probe.check() == {claim.job: "queued"}
    before = probe.snapshot()
    assert await bus.complete(claim) is Finish.STALE
    probe.check()
    probe.assert_unchanged(before, stale=1)


async def test_a_forged_newer_token_is_stale(bus, probe):
    """A token the job has not reached (current + 1) does not complete it."""
    claim = await _claimed(bus, probe)
    before = probe.snapshot()
    assert await bus.complete(dataclasses.replace(claim, token=claim.token + 1)) is Finish.STALE
    assert probe.check() == {claim.job: "active"}
    probe.assert_unchanged(before, stale=1)


async def test_an_expired_lease_not_yet_reaped_still_completes(bus, probe):
    """A worker past its deadline but not yet reaped still owns the job: its complete is DONE."""
    claim = await _claimed(bus, probe)
    probe.expire(claim.job)  # simulates the lease running out, with no sweep in between
    assert await bus.complete(claim) is Finish.DONE
    assert probe.check() == {claim.job: "done"}
    assert (await bus.sweep()).reclaimed == 0
    assert probe.check() == {claim.job: "done"}


async def test_a_queued_job_cannot_be_completed(bus, probe):
    """A token for a job that was never claimed is STALE, and the job stays queued."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    claim = (await bus.claim())[0]
    await bus.release(claim)
    probe.check()
    before = probe.snapshot()
    assert await bus.complete(claim) is Finish.STALE
    assert probe.check() == {job: "queued"}
    probe.assert_unchanged(before, stale=1)


async def test_complete_of_an_unknown_job_raises_and_changes_nothing(bus, probe):
    """A complete for an id that was never admitted raises UnknownJob and writes nothing."""
    claim = await _claimed(bus, probe)
    before = probe.snapshot()
    with pytest.raises(UnknownJob):
        await bus.complete(dataclasses.replace(claim, job=ids.mint("JOB")))
    probe.check()
    probe.assert_unchanged(before)
