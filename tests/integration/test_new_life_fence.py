"""A claim of a job's earlier life never finishes its new life.

A finished id is trimmed to a tombstone after the result ttl (dead ttl), the tombstone expires after the
dedup window, and the id can then be admitted anew: a new row whose attempts (the fencing token) restart
at 0, so the new life's first claim holds it under token 1, as the old life's first claim did. The
claim's request id (stored on the row by claim.lua, carried by every :class:`~echomq.Claim` of that
claim call) tells the two apart: a finishing call of the old claim is refused as stale and changes
nothing. A Claim built without a request id is fenced by its token alone, as before.

Real Redis; every window is 0 ms, so a sweep trims the finished row and its tombstone expires at once.
"""

from __future__ import annotations

import pytest

from echomq import Admission, Bus, Claim, Failure, Finish, Lease, Release, Settings, ids
from tests.support.probe import Probe

FORGETFUL = Settings(result_ttl_ms=0, dedup_window_ms=0, dead_ttl_ms=0)


@pytest.fixture
async def forgetful(redis_server, sync_redis, tag):
    """A bus that forgets a finished id at its next sweep, and its probe (checking every script it runs)."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=FORGETFUL)
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    yield bus, probe
    await bus.aclose()


async def admitted_anew(bus: Bus, probe: Probe, old: Claim) -> Claim:
    """Forget the finished id of ``old`` (the sweep trims its row; the tombstone expires at once), admit
    the same id again and claim it: the new life's first claim, under the very token ``old`` holds."""
    assert (await bus.sweep()).trimmed == 1
    assert probe.client.exists(bus.keys.job(old.job)) == 0
    assert await bus.enqueue(old.job, lane=old.lane, payload=b"second life") is Admission.ADMITTED
    [new] = await bus.claim(lease_ms=60_000, owner="new")
    assert (new.job, new.token) == (old.job, old.token) == (old.job, 1)
    assert new.request
    assert new.request != old.request
    return new


async def first_life(bus: Bus) -> Claim:
    job = ids.mint("JOB")
    assert await bus.enqueue(job, lane="L", payload=b"first life") is Admission.ADMITTED
    [old] = await bus.claim(lease_ms=60_000, owner="old")
    assert old.token == 1
    assert old.request
    return old


async def the_new_holder_completes(bus: Bus, probe: Probe, new: Claim) -> None:
    assert await bus.complete(new, b"by the new holder") is Finish.DONE
    assert probe.row(new.job)["result"] == b"by the new holder"


async def test_a_claim_call_gives_every_job_it_claims_its_request_id(forgetful):
    """Every job of one claim call carries that call's request id (its replay too); each call that names
    none gets a fresh one."""
    bus, _probe = forgetful
    for _ in range(5):
        await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"x")
    claims = await bus.claim(3, request="req-one-call")
    assert [claim.request for claim in claims] == ["req-one-call"] * 3
    replayed = await bus.claim(3, request="req-one-call")  # a retry of that call: the same jobs
    assert [(c.job, c.token, c.request) for c in replayed] == [(c.job, c.token, c.request) for c in claims]
    [a] = await bus.claim(1)
    [b] = await bus.claim(1)
    assert a.request
    assert b.request
    assert a.request != b.request


async def test_an_old_life_complete_retried_after_the_id_was_admitted_anew_is_stale(forgetful):
    """The old claim completed (its reply lost); the id was forgotten, admitted anew and claimed under
    the same token. The old claim's retried complete is stale and changes nothing."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.complete(old, b"by the old holder") is Finish.DONE
    new = await admitted_anew(bus, probe, old)

    before = probe.snapshot()
    assert await bus.complete(old, b"by the old holder") is Finish.STALE
    probe.assert_unchanged(before, stale=1)
    await the_new_holder_completes(bus, probe, new)


async def test_a_stalled_old_life_claim_cannot_complete_the_new_life(forgetful):
    """The old claim stalled past its lease; another claim finished the old life; the id was forgotten
    and admitted anew, and its new claim holds token 1 as the stalled one does."""
    bus, probe = forgetful
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"first life")
    [stalled] = await bus.claim(lease_ms=60_000, owner="stalled")
    probe.expire(job)
    assert (await bus.sweep()).reclaimed == 1
    [other] = await bus.claim(lease_ms=60_000, owner="other")
    assert await bus.complete(other) is Finish.DONE
    new = await admitted_anew(bus, probe, stalled)

    before = probe.snapshot()
    assert await bus.complete(stalled, b"stalled") is Finish.STALE
    probe.assert_unchanged(before, stale=1)
    await the_new_holder_completes(bus, probe, new)


async def test_an_old_life_fail_retried_after_the_id_was_admitted_anew_is_stale(forgetful):
    """The old claim's fail dead-lettered the job; the id was forgotten and admitted anew. The old
    claim's retried fail is stale (not the new life's ending) and changes nothing."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.fail(old, "boom", retryable=False) is Failure.DEAD
    new = await admitted_anew(bus, probe, old)

    before = probe.snapshot()
    assert await bus.fail(old, "boom", retryable=False) is Failure.STALE
    assert await bus.fail(old, "boom", delay_ms=0) is Failure.STALE
    probe.assert_unchanged(before, stale=2)
    await the_new_holder_completes(bus, probe, new)


async def test_an_old_life_fail_is_not_told_the_new_lifes_ending_under_the_same_token(forgetful):
    """The new holder failed (sent back) under token 1: its retry is told RETRYING, the old life's claim
    of token 1 is told STALE, not the new holder's ending."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.fail(old, "boom", retryable=False) is Failure.DEAD
    new = await admitted_anew(bus, probe, old)
    assert await bus.fail(new, "new boom", delay_ms=0) is Failure.RETRYING

    before = probe.snapshot()
    assert await bus.fail(old, "boom", delay_ms=0) is Failure.STALE
    probe.assert_unchanged(before, stale=1)
    assert await bus.fail(new, "new boom", delay_ms=0) is Failure.RETRYING  # the lost-reply answer
    probe.assert_unchanged(before, stale=1)


async def test_an_old_life_extend_after_the_id_was_admitted_anew_is_revoked(forgetful):
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.complete(old) is Finish.DONE
    new = await admitted_anew(bus, probe, old)

    before = probe.snapshot()
    assert await bus.extend(old, 60_000) is Lease.REVOKED
    probe.assert_unchanged(before, revoked=1)
    assert await bus.extend(new, 60_000) is Lease.EXTENDED
    await the_new_holder_completes(bus, probe, new)
    assert await bus.extend(new, 60_000) is Lease.FINISHED
    assert await bus.extend(old, 60_000) is Lease.REVOKED


async def test_an_old_life_release_retried_after_the_id_was_admitted_anew_is_stale(forgetful):
    """The old claim released the job (its reply lost); another claim finished the old life; the id was
    forgotten, admitted anew and claimed under token 1 again. The old claim's retried release is stale."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.release(old) is Release.RELEASED
    [other] = await bus.claim(lease_ms=60_000, owner="other")  # token 2: release keeps the token
    assert await bus.complete(other) is Finish.DONE
    new = await admitted_anew(bus, probe, old)

    before = probe.snapshot()
    assert await bus.release(old) is Release.STALE
    probe.assert_unchanged(before, stale=1)
    await the_new_holder_completes(bus, probe, new)


async def test_an_old_life_release_is_not_told_the_new_lifes_release_under_the_same_token(forgetful):
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.complete(old) is Finish.DONE
    new = await admitted_anew(bus, probe, old)
    assert await bus.release(new) is Release.RELEASED

    before = probe.snapshot()
    assert await bus.release(old) is Release.STALE
    probe.assert_unchanged(before, stale=1)
    assert await bus.release(new) is Release.RELEASED  # the lost-reply answer, this very claim's
    probe.assert_unchanged(before, stale=1)


async def test_a_claim_without_a_request_id_finishes_under_its_token_alone(forgetful):
    """A Claim built from job, lane and token (a process that learned them elsewhere) is fenced by the
    token alone: it finishes the job its token names, whichever claim call holds it."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.complete(old) is Finish.DONE
    new = await admitted_anew(bus, probe, old)
    bare = Claim(new.job, new.lane, new.token)
    assert bare.request == ""
    assert await bus.extend(bare, 60_000) is Lease.EXTENDED
    assert await bus.complete(bare, b"by token") is Finish.DONE
    assert probe.row(new.job)["result"] == b"by token"
    assert await bus.complete(bare, b"by token") is Finish.DONE  # the lost-reply answer
    assert await bus.complete(new, b"by token") is Finish.DONE  # done under its token by its claim call


async def test_a_retried_complete_is_done_even_after_its_row_was_trimmed(redis_server, sync_redis, tag):
    """The tombstone drops the request id (to stay small): a retry of the claim that completed the job,
    after its row was trimmed, is still told DONE, and nothing changes."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(result_ttl_ms=0))
    probe = Probe(sync_redis, bus.keys)
    try:
        old = await first_life(bus)
        assert await bus.complete(old) is Finish.DONE
        assert (await bus.sweep()).trimmed == 1
        assert probe.row(old.job) == {}
        assert probe.tombstone(old.job) is not None
        before = probe.snapshot()
        assert await bus.complete(old) is Finish.DONE
        probe.assert_unchanged(before)
    finally:
        await bus.aclose()


async def test_a_claim_without_a_request_id_fails_and_releases_under_its_token_alone(forgetful):
    """The same for fail and release: the token alone fences them, and their retries are told what the
    first call did."""
    bus, probe = forgetful
    old = await first_life(bus)
    assert await bus.complete(old) is Finish.DONE
    new = await admitted_anew(bus, probe, old)
    bare = Claim(new.job, new.lane, new.token)
    assert await bus.release(bare) is Release.RELEASED
    assert await bus.release(bare) is Release.RELEASED  # the lost-reply answer
    [again] = await bus.claim(lease_ms=60_000)
    bare = Claim(again.job, again.lane, again.token)
    assert await bus.fail(bare, "boom", retryable=False) is Failure.DEAD
    assert await bus.fail(bare, "boom", retryable=False) is Failure.DEAD  # the lost-reply answer
    assert probe.row(new.job)["state"] == b"dead"
