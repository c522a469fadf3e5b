"""cancel.lua and revoke.lua through echomq.control: take a job out for good, queued or active."""

from __future__ import annotations

import asyncio

import pytest

from echomq import (
    Control,
    Finish,
    InvalidId,
    InvalidOption,
    Lease,
    NewJob,
    SyncBus,
    UnknownJob,
    Worker,
    control,
    ids,
)
from tests.support.workers import eventually, running


async def test_cancel_takes_a_queued_job_out_and_dead_letters_it_with_the_reason(bus, probe):
    """A cancelled queued job leaves its lane (and the lane the ring, once empty) for the dead set; no claim
    ever gets it, and the next job of the lane is served as before."""
    first, second = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue_many([NewJob(first, "L", b"a"), NewJob(second, "M", b"b")])
    assert await bus.cancel(first, "customer left") is Control.DONE
    assert probe.lane("L") == []
    assert probe.ring() == ["M"]
    row = probe.row(first)
    assert (row["state"], row["error"]) == (b"dead", b"cancelled: customer left")
    assert [claim.job for claim in await bus.claim(count=5)] == [second]
    assert probe.counters()["cancelled"] == 1


async def test_cancel_takes_a_delayed_job_out(bus, probe):
    """A delayed job (a scheduled one, or a retry in its backoff) is cancelled out of delayed."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", delay_ms=60_000)
    assert await bus.cancel(job) is Control.DONE
    assert probe.members("delayed") == {}
    assert (await bus.sweep()).promoted == 0
    assert probe.row(job)["state"] == b"dead"


async def test_cancel_refuses_an_active_or_finished_job_and_changes_nothing(bus, probe):
    """Cancel applies before a claim: an active job is left to its worker (revoke it), a done one alone."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    before = probe.row(job)
    assert await bus.cancel(job) is Control.REFUSED
    assert probe.row(job) == before
    assert await bus.complete(claim, b"r") is Finish.DONE
    assert await bus.cancel(job) is Control.REFUSED
    assert probe.row(job)["state"] == b"done"


async def test_a_retried_cancel_answers_done_again_and_changes_nothing(bus, probe):
    """Lost reply: the retry of a cancel that ran (the same request id) finds its id on the row and says
    DONE, nothing moves, even after the job was retried from the dead set; another call is refused."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    assert await control.cancel(bus, job, "x", request="call-1") is Control.DONE
    snapshot = probe.row(job)
    assert await control.cancel(bus, job, "x", request="call-1") is Control.DONE
    assert probe.row(job) == snapshot
    assert await bus.cancel(job, "another call") is Control.REFUSED
    assert await bus.retry_dead(job)
    assert await control.cancel(bus, job, "x", request="call-1") is Control.DONE  # its retry: nothing more
    assert probe.lane("L") == [job]
    assert probe.counters()["cancelled"] == 1


async def test_a_dead_letter_whose_error_reads_like_a_cancel_is_not_taken_for_one(bus, probe):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "cancelled by the upstream API", retryable=False)
    assert await bus.cancel(job) is Control.REFUSED
    assert await bus.revoke(job) is Control.REFUSED
    assert probe.counters().get("cancelled", 0) == 0


async def test_a_retried_revoke_answers_done_and_does_not_act_on_a_new_life(bus, probe):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    await bus.claim()
    assert await control.revoke(bus, job, "stop", request="r-1") is Control.DONE
    assert await bus.retry_dead(job)
    [again] = await bus.claim()
    assert await control.revoke(bus, job, "stop", request="r-1") is Control.DONE  # the retry: nothing more
    assert probe.row(job)["state"] == b"active"
    assert await bus.complete(again, b"ok") is Finish.DONE
    assert probe.counters()["revocations"] == 1


async def test_cancel_against_claim_one_wins_never_both(bus, probe):
    """Many jobs cancelled while workers claim them: each is either claimed (cancel refused) or cancelled
    (never claimed), whatever the interleaving."""
    minted = [ids.mint("JOB") for _ in range(200)]
    await bus.enqueue_many([NewJob(job, f"L{i % 7}", b"") for i, job in enumerate(minted)])

    async def claimer():
        got = []
        while True:
            batch = await bus.claim(count=3)
            if not batch:
                return got
            got += [claim.job for claim in batch]
            await asyncio.sleep(0)

    async def canceller():
        return [job for job in reversed(minted) if await bus.cancel(job) is Control.DONE]

    claimed, cancelled = await asyncio.gather(claimer(), canceller())
    assert not set(claimed) & set(cancelled)
    assert set(claimed) | set(cancelled) == set(minted)
    states = probe.check()
    assert all(states[job] == "dead" for job in cancelled)
    assert all(states[job] == "active" for job in claimed)


async def test_revoke_takes_an_active_job_and_its_finish_is_refused(bus, probe):
    """A revoked job is dead-lettered at once; its worker's complete is refused as stale and changes
    nothing, so its result never lands."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    assert await bus.revoke(job, "operator") is Control.DONE
    row = probe.row(job)
    assert (row["state"], row["error"]) == (b"dead", b"revoked: operator")
    assert await bus.complete(claim, b"late") is Finish.STALE
    assert "result" not in probe.row(job)
    assert await bus.extend(claim, 5000) is Lease.REVOKED
    assert probe.counters()["revocations"] == 1


async def test_revoke_refuses_a_job_that_is_not_active(bus, probe):
    """Queued, done: revoke leaves it alone (cancel the queued one)."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    assert await bus.revoke(job) is Control.REFUSED
    assert probe.lane("L") == [job]


async def test_revoke_against_complete_whichever_runs_first_wins(bus, probe):
    """Revoke and complete race on many jobs: each job ends exactly once, done or revoked."""
    minted = [ids.mint("JOB") for _ in range(100)]
    await bus.enqueue_many([NewJob(job, "L", b"") for job in minted])
    claims = await bus.claim(count=100)

    async def completer():
        return [c.job for c in claims if await bus.complete(c, b"ok") is Finish.DONE]

    async def revoker():
        return [job for job in reversed(minted) if await bus.revoke(job) is Control.DONE]

    completed, revoked = await asyncio.gather(completer(), revoker())
    assert not set(completed) & set(revoked)
    assert set(completed) | set(revoked) == set(minted)
    counters = probe.counters()
    assert (counters["completed"], counters["revocations"]) == (len(completed), len(revoked))


async def test_a_revoked_handler_sees_job_revoked_and_its_result_is_refused(bus, probe):
    """A running (thread) handler whose job is revoked learns it from its lease keeper (job.revoked is set,
    as the worker's doc promises), and the worker's complete is refused: the job stays dead with the
    revoke's reason and no result."""
    job = ids.mint("JOB")
    started, seen = asyncio.Event(), []
    loop = asyncio.get_running_loop()

    def handler(run):
        loop.call_soon_threadsafe(started.set)
        seen.append(run.revoked.wait(20))
        return b"too late"

    worker = Worker(bus, handler, concurrency=1, lease_ms=600)
    async with running(worker):
        await bus.enqueue(job, lane="L", payload=b"")
        await asyncio.wait_for(started.wait(), 20)
        assert await bus.revoke(job, "stop it") is Control.DONE
        await eventually(lambda: seen == [True], what="the handler saw job.revoked")
    row = probe.row(job)
    assert (row["state"], row["error"]) == (b"dead", b"revoked: stop it")
    assert "result" not in row
    assert worker.counts.completed == 0


async def test_a_revoked_async_handler_is_cancelled(bus, probe):
    """An async handler of a revoked job is cancelled at the keeper's next renewal (it cannot be told
    otherwise while it awaits), and nothing it would have returned lands."""
    job = ids.mint("JOB")
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def handler(run):
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return b"never"

    worker = Worker(bus, handler, concurrency=1, lease_ms=600)
    async with running(worker):
        await bus.enqueue(job, lane="L", payload=b"")
        await asyncio.wait_for(started.wait(), 20)
        assert await bus.revoke(job) is Control.DONE
        await asyncio.wait_for(cancelled.wait(), 20)
    assert probe.row(job)["state"] == b"dead"
    assert worker.counts.completed == 0


def test_the_sync_bus_cancels_and_revokes(redis_server, tag):
    """SyncBus has the same cancel and revoke."""
    with SyncBus.from_url(redis_server.url, tag=tag) as sync:
        job = ids.mint("JOB")
        sync.enqueue(job, lane="L", payload=b"")
        assert sync.revoke(job) is Control.REFUSED
        assert sync.cancel(job) is Control.DONE
        assert sync.inspect(job).state == "dead"


@pytest.mark.parametrize(
    ("job", "reason", "error"),
    [
        ("JOB-not-an-id", "", InvalidId),
        (None, "", InvalidId),
        ("ok", 5, InvalidOption),
        ("ok", "\ud800", InvalidOption),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(bus, probe, job, reason, error):
    """An ill-formed id or reason is refused before anything is sent."""
    real = ids.mint("JOB")
    await bus.enqueue(real, lane="L", payload=b"")
    target = real if job == "ok" else job
    for call in (bus.cancel, bus.revoke):
        with pytest.raises(error):
            await call(target, reason)
    assert probe.lane("L") == [real]


async def test_an_unknown_job_is_unknown(bus):
    with pytest.raises(UnknownJob):
        await bus.cancel(ids.mint("JOB"))
    with pytest.raises(UnknownJob):
        await bus.revoke(ids.mint("JOB"))
