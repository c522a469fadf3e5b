"""echomq.worker races: a handler's own CancelledError, a handler finishing its job, run() cancelled."""

from __future__ import annotations

import asyncio

from echomq import Worker, ids
from tests.support import invariants
from tests.support.workers import eventually, state_is


async def _enqueue(bus, payload=b"p", *, lane="L", max_attempts=5):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=payload, max_attempts=max_attempts)
    return job


async def test_handler_raising_cancelled_error_fails_the_try_and_the_retry_runs(bus, sync_redis):
    """A CancelledError raised by the handler itself (no cancel of the run) fails the try; it is retried."""
    runs = []

    async def handler(job):
        runs.append(job.attempt)
        if job.attempt == 1:
            inner = asyncio.get_running_loop().create_future()
            inner.cancel()
            await inner  # a cancelled inner future: CancelledError, though nobody cancelled this run
        return b"second run"

    job = await _enqueue(bus)
    worker = Worker(bus, handler, lease_ms=60_000, sweep_every_s=0.2)
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: state_is(bus, job, "done"), 20, "the retry completed the job")
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    info = await bus.inspect(job)
    assert runs == [1, 2]
    assert info.result == b"second run"
    assert info.error is not None
    assert info.error.startswith("CancelledError")
    assert worker.counts.failed == 1
    assert invariants.check(sync_redis, bus.keys) == {job: "done"}


async def test_handler_that_finished_the_job_itself_is_not_revoked_by_the_keeper(bus):
    """A handler that completed its job by its own fenced call, then works on, is not revoked or cancelled."""
    seen = {}

    async def handler(job):
        outcome = await bus.complete(job.claim, b"by the handler")
        try:
            await asyncio.sleep(1.0)  # several keeper rounds (lease 300 ms: one every 100 ms)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        seen["revoked"] = job.revoked.is_set()
        return outcome

    job = await _enqueue(bus)
    worker = Worker(bus, handler, lease_ms=300)
    task = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: worker.processed == 1 or worker.counts.revoked > 0, 20, "the run ended")
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
    assert seen == {"revoked": False}
    assert worker.counts.revoked == 0
    assert worker.processed == 1
    assert (await bus.inspect(job)).result == b"by the handler"


async def test_run_cancelled_twice_releases_in_flight_jobs_and_stops_renewing(bus, sync_redis):
    """run() cancelled during its grace period releases in-flight jobs at once and stops the lease keeper."""
    started = asyncio.Event()

    async def handler(job):
        started.set()
        await asyncio.sleep(600)

    job = await _enqueue(bus)
    worker = Worker(bus, handler, lease_ms=60_000, grace_s=600)
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 20)
    task.cancel()  # a first cancel: like stop(), the job gets the (long) grace period
    await asyncio.sleep(0.3)
    assert not task.done()
    task.cancel()  # a second one, e.g. asyncio.wait_for giving up on the first: release now
    await asyncio.wait([task], timeout=20)
    assert task.done()
    assert await state_is(bus, job, "queued")
    assert worker.counts.released == 1
    assert worker.in_flight == 0
    assert invariants.check(sync_redis, bus.keys) == {job: "queued"}
