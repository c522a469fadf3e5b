"""extend.lua through echomq.finish.extend: lease renewal on the server clock, revoked once reaped."""

from __future__ import annotations

import dataclasses

import pytest

from echomq import Finish, Lease, UnknownJob, ids


async def _claimed(bus, probe, lease_ms=1_000):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p")
    [claim] = await bus.claim(lease_ms=lease_ms)
    assert probe.check() == {job: "active"}
    return claim


async def test_extend_moves_the_deadline_to_server_now_plus_lease(bus, probe):
    """EXTENDED: the deadline in active and on the row becomes server TIME + the new lease."""
    claim = await _claimed(bus, probe, lease_ms=1_000)
    before_ms = probe.now_ms()
    assert await bus.extend(claim, 600_000) is Lease.EXTENDED
    after_ms = probe.now_ms()
    deadline = probe.members("active")[claim.job]
    assert before_ms + 600_000 <= deadline <= after_ms + 600_000
    assert deadline > claim.deadline_ms
    assert int(probe.row(claim.job)["deadline"]) == deadline
    assert probe.check() == {claim.job: "active"}
    assert probe.counters()["extended"] == 1


async def test_extend_can_shorten_the_lease(bus, probe):
    """The new deadline is now + lease even when that is earlier than the old deadline."""
    claim = await _claimed(bus, probe, lease_ms=600_000)
    before_ms = probe.now_ms()
    assert await bus.extend(claim, 1_000) is Lease.EXTENDED
    deadline = probe.members("active")[claim.job]
    assert before_ms + 1_000 <= deadline < claim.deadline_ms
    probe.check()


async def test_extend_does_not_change_the_token_or_the_tries(bus, probe):
    """A renewed lease keeps the same claim: the token still completes the job."""
    claim = await _claimed(bus, probe)
    for _ in range(3):
        assert await bus.extend(claim, 60_000) is Lease.EXTENDED
        probe.check()
    row = probe.row(claim.job)
    assert (row["attempts"], row["tries"]) == (b"1", b"1")
    assert await bus.complete(claim) is Finish.DONE
    probe.check()


async def test_extend_rescues_an_expired_lease_that_was_not_yet_reaped(bus, probe):
    """A lease past its deadline but not yet swept can still be extended, and the sweep then keeps it."""
    claim = await _claimed(bus, probe)
    probe.expire(claim.job)  # simulates the lease running out
    assert await bus.extend(claim, 600_000) is Lease.EXTENDED
    assert (await bus.sweep()).reclaimed == 0
    assert probe.check() == {claim.job: "active"}


async def test_extend_after_a_reap_is_revoked_and_changes_nothing(bus, probe):
    """Once the sweep reaped the lease, extend answers REVOKED; only the revoked counter moves."""
    claim = await _claimed(bus, probe)
    probe.expire(claim.job)  # simulates the lease running out
    assert (await bus.sweep()).reclaimed == 1
    assert probe.check() == {claim.job: "queued"}
    before = probe.snapshot()
    assert await bus.extend(claim, 60_000) is Lease.REVOKED
    assert probe.check() == {claim.job: "queued"}
    probe.assert_unchanged(before, revoked=1)


async def test_extend_after_a_reap_and_reclaim_is_revoked_for_the_old_token(bus, probe):
    """The old claim is REVOKED while the new owner's claim extends normally."""
    first = await _claimed(bus, probe)
    probe.expire(first.job)  # simulates the lease running out
    await bus.sweep()
    [second] = await bus.claim(lease_ms=1_000)
    probe.check()
    before = probe.snapshot()
    assert await bus.extend(first, 60_000) is Lease.REVOKED
    probe.assert_unchanged(before, revoked=1)
    assert await bus.extend(second, 60_000) is Lease.EXTENDED
    assert probe.check() == {first.job: "active"}


async def test_extend_after_its_own_complete_is_finished_not_revoked(bus, probe):
    """A renewal that lost the race with its own claim's completion answers FINISHED, counts no
    revocation, and the job stays done."""
    # A lease (and so a claim record) that outlives the test: a record expiring between the two
    # snapshots would read as a change on a loaded machine.
    claim = await _claimed(bus, probe, lease_ms=60_000)
    await bus.complete(claim)
    before = probe.snapshot()
    assert await bus.extend(claim, 60_000) is Lease.FINISHED
    assert probe.check() == {claim.job: "done"}
    probe.assert_unchanged(before)


async def test_extend_of_a_job_another_claim_completed_is_revoked(bus, probe):
    """A lease reaped, re-claimed and completed by another claim is REVOKED for the first claim."""
    first = await _claimed(bus, probe)
    probe.expire(first.job)
    await bus.sweep()
    [second] = await bus.claim()
    await bus.complete(second)
    before = probe.snapshot()
    assert await bus.extend(first, 60_000) is Lease.REVOKED
    probe.assert_unchanged(before, revoked=1)


async def test_extend_of_an_unknown_job_raises_and_changes_nothing(bus, probe):
    """An extend for an id never admitted raises UnknownJob and writes nothing."""
    claim = await _claimed(bus, probe)
    before = probe.snapshot()
    with pytest.raises(UnknownJob):
        await bus.extend(dataclasses.replace(claim, job=ids.mint("JOB")), 60_000)
    probe.assert_unchanged(before)
