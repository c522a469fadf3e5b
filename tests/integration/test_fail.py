"""fail.lua through echomq.finish.fail: retry now or after a backoff, or dead-letter; fenced by the token."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from echomq import Bus, Failure, Finish, InvalidLane, Release, Settings, finish, ids
from tests.support.probe import Probe


async def _claimed(bus, probe, lane="L", **options):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=b"p", **options)
    probe.check()
    [claim] = await bus.claim()
    assert claim.job == job
    probe.check()
    return claim


async def test_fail_without_delay_returns_the_job_to_its_lane_at_once(bus, probe):
    """A retryable failure with delay 0 is RETRYING: queued again, the error kept, the try counted."""
    claim = await _claimed(bus, probe, max_attempts=3)
    assert await bus.fail(claim, "boom", delay_ms=0) is Failure.RETRYING
    assert probe.check() == {claim.job: "queued"}
    row = probe.row(claim.job)
    assert row["error"] == b"boom"
    assert (row["attempts"], row["tries"]) == (b"1", b"1")
    assert "deadline" not in row
    assert probe.ring() == ["L"]
    assert probe.counters()["retried"] == 1
    [again] = await bus.claim()
    assert (again.job, again.token, again.tries) == (claim.job, 2, 2)
    probe.check()


async def test_fail_without_delay_goes_back_to_the_mint_position(bus, probe):
    """A failed job re-enters its lane ahead of later-minted jobs, not at the back."""
    first = await _claimed(bus, probe)
    later = ids.mint("JOB")
    await bus.enqueue(later, lane="L", payload=b"")
    probe.check()
    await bus.fail(first, "boom", delay_ms=0)
    assert probe.lane("L") == [first.job, later]
    assert probe.ring() == ["L"]
    probe.check()


async def test_fail_with_delay_parks_the_job_in_delayed(bus, probe):
    """A retryable failure with a delay is RETRYING into delayed at server now + delay."""
    claim = await _claimed(bus, probe)
    before_ms = probe.now_ms()
    assert await bus.fail(claim, "later", delay_ms=60_000) is Failure.RETRYING
    after_ms = probe.now_ms()
    assert probe.check() == {claim.job: "delayed"}
    due = probe.members("delayed")[claim.job]
    assert before_ms + 60_000 <= due <= after_ms + 60_000
    assert probe.ring() == []
    assert await bus.claim() == []
    probe.make_due(claim.job)  # simulates the backoff passing
    assert (await bus.sweep()).promoted == 1
    assert probe.check() == {claim.job: "queued"}
    [again] = await bus.claim()
    assert again.token == 2
    probe.check()


async def test_fail_without_a_delay_uses_the_jittered_backoff(redis_server, sync_redis, tag):
    """With no delay given, the retry waits the exponential backoff with jitter, read on the server clock."""
    settings = Settings(backoff_base_ms=40_000, backoff_cap_ms=100_000)
    bus = Bus.from_url(redis_server.url, tag=tag, settings=settings)
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    try:
        claim = await _claimed(bus, probe, max_attempts=5)
        before_ms = probe.now_ms()
        assert await bus.fail(claim, "boom") is Failure.RETRYING
        after_ms = probe.now_ms()
        due = probe.members("delayed")[claim.job]
        assert before_ms + 20_000 <= due <= after_ms + 40_000
        probe.check()
    finally:
        await bus.aclose()


def test_backoff_doubles_per_try_within_jitter_and_is_capped():
    """backoff_ms is in [step/2, step] where step doubles per try from the base, up to the cap."""
    bus = SimpleNamespace(settings=Settings(backoff_base_ms=1_000, backoff_cap_ms=10_000))
    for tries, step in [(1, 1_000), (2, 2_000), (3, 4_000), (4, 8_000), (5, 10_000), (60, 10_000)]:
        for _ in range(50):
            assert step // 2 <= finish.backoff_ms(bus, tries) <= step


async def test_fail_on_the_last_try_dead_letters_the_job(bus, probe):
    """A failure on the try that reaches max attempts is DEAD, with the error recorded."""
    claim = await _claimed(bus, probe, max_attempts=2)
    assert await bus.fail(claim, "first", delay_ms=0) is Failure.RETRYING
    probe.check()
    [second] = await bus.claim()
    assert second.tries == 2
    probe.check()
    before_ms = probe.now_ms()
    assert await bus.fail(second, "second", delay_ms=0) is Failure.DEAD
    assert probe.check() == {claim.job: "dead"}
    assert before_ms <= probe.members("dead")[claim.job] <= probe.now_ms()
    row = probe.row(claim.job)
    assert row["error"] == b"second"
    assert "finished" in row
    counters = probe.counters()
    assert (counters["retried"], counters["dead"]) == (1, 1)
    assert await bus.dead_jobs() == [(claim.job, int(probe.members("dead")[claim.job]))]


async def test_a_non_retryable_failure_dead_letters_at_once(bus, probe):
    """retryable=False sends the job to dead on its first try, whatever its max attempts."""
    claim = await _claimed(bus, probe, max_attempts=10)
    assert await bus.fail(claim, "bad input", retryable=False) is Failure.DEAD
    assert probe.check() == {claim.job: "dead"}
    assert probe.row(claim.job)["error"] == b"bad input"


async def test_a_stale_fail_changes_nothing(bus, probe):
    """A fail under a token that no longer holds the job is STALE; only the stale counter moves."""
    claim = await _claimed(bus, probe)
    assert await bus.complete(claim) is Finish.DONE
    probe.check()
    before = probe.snapshot()
    assert await bus.fail(claim, "late", delay_ms=0) is Failure.STALE
    assert await bus.fail(claim, "late", retryable=False) is Failure.STALE
    probe.check()
    probe.assert_unchanged(before, stale=2)


async def test_a_fail_after_reap_and_reclaim_is_stale(bus, probe):
    """The worker that lost its lease cannot fail (or dead-letter) the job another worker holds."""
    first = await _claimed(bus, probe, max_attempts=5)
    probe.expire(first.job)  # simulates the lease running out
    await bus.sweep()
    [second] = await bus.claim()
    probe.check()
    before = probe.snapshot()
    assert await bus.fail(first, "late", retryable=False) is Failure.STALE
    assert probe.check() == {first.job: "active"}
    probe.assert_unchanged(before, stale=1)
    assert await bus.complete(second) is Finish.DONE


async def test_fail_into_an_emptied_lane_puts_the_lane_back_in_the_ring(bus, probe):
    """A retry into a lane that left the ring makes the lane serviceable again, at the ring's end."""
    claim = await _claimed(bus, probe, lane="A")
    await bus.enqueue(ids.mint("JOB"), lane="B", payload=b"")
    assert probe.ring() == ["B"]
    await bus.fail(claim, "boom", delay_ms=0)
    assert probe.ring() == ["B", "A"]
    probe.check()


async def test_fail_keeps_the_priority(bus, probe):
    """A retried job goes back at its priority, ahead of lower-priority work of its lane."""
    claim = await _claimed(bus, probe, priority=-3)
    other = ids.mint("JOB")
    await bus.enqueue(other, lane="L", payload=b"", priority=0)
    await bus.fail(claim, "boom", delay_ms=0)
    assert probe.lane("L") == [claim.job, other]
    assert probe.client.zscore(bus.keys.lane("L"), claim.job) == -3
    probe.check()


async def test_a_long_error_is_truncated(bus, probe):
    """The stored error text is cut to 4096 characters."""
    claim = await _claimed(bus, probe)
    await bus.fail(claim, "x" * 10_000, retryable=False)
    assert probe.row(claim.job)["error"] == b"x" * 4096
    probe.check()


async def test_fail_with_a_claim_naming_another_lane_is_refused(bus, probe):
    """A claim naming another lane than the job's is refused as InvalidLane and changes nothing."""
    claim = await _claimed(bus, probe)
    before = probe.snapshot()
    with pytest.raises(InvalidLane, match="which is 'L'"):
        await bus.fail(dataclasses.replace(claim, lane="M"), "boom")
    probe.check()
    probe.assert_unchanged(before)


@pytest.mark.parametrize(
    ("retryable", "outcome", "state"), [(True, Failure.RETRYING, "queued"), (False, Failure.DEAD, "dead")]
)
async def test_a_second_fail_of_the_same_claim_answers_what_the_first_did(
    bus, probe, retryable, outcome, state
):
    """A fail retried after its reply was lost is told what the first one did (RETRYING or DEAD), even
    once the job was claimed again; nothing changes and no counter moves."""
    claim = await _claimed(bus, probe, max_attempts=5)
    assert await bus.fail(claim, "boom", retryable=retryable, delay_ms=0) is outcome
    assert probe.check() == {claim.job: state}
    before = probe.snapshot()
    assert await bus.fail(claim, "boom", retryable=retryable, delay_ms=0) is outcome
    probe.assert_unchanged(before)
    if retryable:
        [again] = await bus.claim()
        assert again.token == claim.token + 1
        before = probe.snapshot()
        assert await bus.fail(claim, "boom", delay_ms=0) is Failure.RETRYING
        assert await bus.fail(claim, "boom", retryable=False) is Failure.RETRYING  # what it did, not asks
        probe.assert_unchanged(before)
        assert probe.check() == {claim.job: "active"}


async def test_a_fail_retried_after_four_later_endings_is_stale(bus, probe):
    """A row remembers the last 4 fail/release endings: a retry older than that is answered STALE."""
    first = await _claimed(bus, probe, max_attempts=10)
    assert await bus.fail(first, "boom", delay_ms=0) is Failure.RETRYING
    for _ in range(3):
        [later] = await bus.claim()
        assert await bus.release(later) is Release.RELEASED
    assert await bus.fail(first, "boom", delay_ms=0) is Failure.RETRYING  # 4 endings kept: still known
    [fifth] = await bus.claim()
    assert await bus.fail(fifth, "boom", delay_ms=0) is Failure.RETRYING
    before = probe.snapshot()
    assert await bus.fail(first, "boom", delay_ms=0) is Failure.STALE
    probe.assert_unchanged(before, stale=1)
