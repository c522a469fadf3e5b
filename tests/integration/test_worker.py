"""echomq.worker on a real Redis: results, failures, self-finishing handlers, leases, revocation, config."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

from echomq import Bus, Finish, JobState, Permanent, Worker, ids
from echomq.testing.server import RedisProcess
from tests.support import invariants
from tests.support.probe import Probe
from tests.support.workers import Sweeper, eventually, job_state, running, state_is


async def _enqueue(bus, payload=b"p", *, lane="L", max_attempts=5):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=payload, max_attempts=max_attempts)
    return job


def _events(caplog, event):
    return [record for record in caplog.records if getattr(record, "event", None) == event]


async def _until_state(bus, job, state, timeout=20.0):
    await eventually(lambda: state_is(bus, job, state), timeout, f"{job} {state}")


async def _reap(bus, probe, job):
    """Force the job's lease past and sweep until the sweep reclaims it (a renewal may land between
    the two steps: then expire it again)."""
    reclaimed = 0
    while not reclaimed:
        probe.expire(job)
        reclaimed = (await bus.sweep()).reclaimed


async def test_async_handler_results_complete_jobs(bus, sync_redis):
    """An async handler's bytes (or None) become the job's result and the job is done."""

    async def handler(job):
        return None if job.payload == b"none" else b"r:" + job.payload

    jobs = [await _enqueue(bus, payload, lane=f"L{i}") for i, payload in enumerate([b"a", b"b", b"none"])]
    async with running(Worker(bus, handler, concurrency=2)) as worker:
        for job in jobs:
            await _until_state(bus, job, "done")
    assert [(await bus.inspect(job)).result for job in jobs] == [b"r:a", b"r:b", b""]
    assert worker.processed == 3
    assert worker.failed == 0
    assert invariants.check(sync_redis, bus.keys) == dict.fromkeys(jobs, "done")


async def test_sync_handler_runs_in_a_thread(bus):
    """A plain function handler runs off the event loop thread and its result completes the job."""
    threads = []

    def handler(job):
        threads.append(threading.current_thread())
        return job.payload.upper()

    job = await _enqueue(bus, b"quiet")
    async with running(Worker(bus, handler)):
        await _until_state(bus, job, "done")
    assert threads
    assert threads[0] is not threading.main_thread()
    assert (await bus.inspect(job)).result == b"QUIET"


async def test_exception_retries_then_dead_letters(bus, sync_redis):
    """A handler that raises is retried with backoff, then dead-lettered at max attempts with the error."""
    runs = []

    async def handler(job):
        runs.append(job.attempt)
        raise RuntimeError(f"broken on try {job.tries}")

    job = await _enqueue(bus, max_attempts=2)
    async with running(Worker(bus, handler)) as worker:
        await _until_state(bus, job, "dead")
    info = await bus.inspect(job)
    assert runs == [1, 2]
    assert info.tries == 2
    assert info.error == "RuntimeError: broken on try 2"
    assert worker.counts.failed == 2
    assert worker.counts.dead == 1
    assert (await bus.stats()).counters["retried"] == 1
    assert invariants.check(sync_redis, bus.keys) == {job: "dead"}


async def test_permanent_error_dead_letters_at_once(bus):
    """A handler that raises Permanent is dead-lettered after one try, whatever its max attempts."""

    def handler(job):
        raise Permanent("this payload can never be scored")

    job = await _enqueue(bus, max_attempts=5)
    async with running(Worker(bus, handler)) as worker:
        await _until_state(bus, job, "dead")
    info = await bus.inspect(job)
    assert info.tries == 1
    assert info.error == "Permanent: this payload can never be scored"
    assert worker.counts.dead == 1
    assert (await bus.stats()).counters["retried"] == 0


async def test_a_handler_error_holding_a_lone_surrogate_is_recorded_escaped(bus):
    """Bus.fail refuses text UTF-8 cannot encode, so the worker writes a lone surrogate as an escape."""

    def handler(job):
        raise Permanent("bad \ud800 text")

    job = await _enqueue(bus, max_attempts=5)
    async with running(Worker(bus, handler)) as worker:
        await _until_state(bus, job, "dead")
    assert (await bus.inspect(job)).error == "Permanent: bad \\ud800 text"
    assert worker.counts.dead == 1


async def test_handler_that_finishes_the_job_itself_is_not_completed_again(bus):
    """A handler returning a Finish finished the job itself: the worker sends no second complete."""

    async def handler(job):
        return await bus.complete(job.claim, b"by the handler")

    job = await _enqueue(bus)
    async with running(Worker(bus, handler)) as worker:
        await _until_state(bus, job, "done")
        await asyncio.sleep(0.2)  # room for a (wrong) second complete to land before we count
    counters = (await bus.stats()).counters
    assert counters["completed"] == 1
    assert counters["stale"] == 0
    assert (await bus.inspect(job)).result == b"by the handler"
    assert worker.processed == 1


async def test_wrong_return_type_dead_letters_with_a_message(bus):
    """A handler returning something other than bytes, None or Finish is a bug: dead with a clear error."""

    async def handler(job):
        return "text, not bytes"

    job = await _enqueue(bus)
    async with running(Worker(bus, handler)):
        await _until_state(bus, job, "dead")
    expected = "bytes, None, Effects, Completion or Finish"
    assert (await bus.inspect(job)).error == f"handler returned str; expected {expected}"


@pytest.mark.parametrize("blocks_loop", [False, True], ids=["awaits", "blocks-the-event-loop"])
async def test_lease_is_extended_while_a_long_handler_runs(bus, redis_server, tag, blocks_loop):
    """A handler running for several leases keeps its job: renewals land even if it blocks the loop."""
    runs = []

    async def handler(job):
        runs.append(job.attempt)
        if blocks_loop:
            time.sleep(2.0)  # the event loop is stuck; only the lease keeper thread can renew
        else:
            await asyncio.sleep(2.0)
        return b"finished"

    job = await _enqueue(bus)
    with Sweeper(redis_server.url, tag) as sweeper:
        async with running(Worker(bus, handler, lease_ms=600)):
            await _until_state(bus, job, "done")
    assert sweeper.reports  # the sweeper did run during the job
    assert sweeper.reclaimed == 0
    counters = (await bus.stats()).counters
    assert counters["reclaimed"] == 0
    assert counters["extended"] >= 1
    assert counters["stale"] == 0
    assert runs == [1]
    assert (await bus.inspect(job)).attempts == 1


async def test_revoked_is_set_when_the_lease_is_reaped(bus, sync_redis):
    """When the sweep reaps a thread handler's lease, job.revoked is set and its late finish is stale."""
    seen = {}
    started = threading.Event()

    def handler(job):
        if job.attempt == 1:
            started.set()
            seen["revoked"] = job.revoked.wait(20)
            return b"too late"
        return b"second run"

    job = await _enqueue(bus)
    probe = Probe(sync_redis, bus.keys)
    async with running(Worker(bus, handler, lease_ms=900)) as worker:
        await eventually(started.is_set, what="first run started")
        await _reap(bus, probe, job)
        await _until_state(bus, job, "done")
        await eventually(lambda: worker.counts.stale == 1, what="stale finish")
    assert seen == {"revoked": True}
    assert worker.counts.revoked == 1
    info = await bus.inspect(job)
    assert info.attempts == 2
    assert info.result == b"second run"
    assert (await bus.stats()).counters["completed"] == 1


async def test_async_handler_is_cancelled_when_its_lease_is_reaped(bus, sync_redis):
    """A reaped lease cancels an async handler before it goes on; the next claim runs the job again."""
    first_run = {}
    started = asyncio.Event()

    async def handler(job):
        if job.attempt == 1:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                first_run["revoked"] = job.revoked.is_set()
                raise
            first_run["went_on"] = True
        return b"second run"

    job = await _enqueue(bus)
    probe = Probe(sync_redis, bus.keys)
    async with running(Worker(bus, handler, lease_ms=900)) as worker:
        await eventually(started.is_set, what="first run started")
        await _reap(bus, probe, job)
        await _until_state(bus, job, "done")
    assert first_run == {"revoked": True}
    assert worker.counts.revoked == 1
    assert worker.counts.stale == 0  # the cancelled run sent no finish at all
    assert (await bus.inspect(job)).attempts == 2


async def test_thread_handler_timeout_fails_the_try_and_sets_revoked(bus):
    """A thread handler past job_timeout_s: the try fails with a timeout, revoked is set, the retry runs."""
    seen = {}

    def handler(job):
        if job.attempt == 1:
            seen["revoked"] = job.revoked.wait(20)
            return b"ignored"
        return b"in time"

    job = await _enqueue(bus)
    async with running(Worker(bus, handler, job_timeout_s=0.3)) as worker:
        await _until_state(bus, job, "done")
    assert seen == {"revoked": True}
    assert worker.counts.timed_out == 1
    info = await bus.inspect(job)
    assert info.tries == 2
    assert info.result == b"in time"
    assert info.error is not None
    assert info.error.startswith("TimedOut")


async def test_async_handler_timeout_cancels_it(bus):
    """An async handler past job_timeout_s is cancelled and the try fails with a timeout."""
    cancelled = asyncio.Event()

    async def handler(job):
        if job.attempt == 1:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return b"ok"

    job = await _enqueue(bus)
    async with running(Worker(bus, handler, job_timeout_s=0.3)) as worker:
        await _until_state(bus, job, "done")
    assert cancelled.is_set()
    assert worker.counts.timed_out == 1


async def test_stop_releases_in_flight_jobs_after_the_grace_period(bus, sync_redis):
    """stop() waits grace_s, then hands unfinished jobs back to their lane without counting the try."""

    async def handler(job):
        await asyncio.sleep(30)

    job = await _enqueue(bus)
    worker = Worker(bus, handler, grace_s=0.2, lease_ms=60_000)
    async with running(worker):
        await _until_state(bus, job, "active")
    info = await bus.inspect(job)
    assert info.state is JobState.QUEUED
    assert info.tries == 0
    assert worker.counts.released == 1
    assert invariants.check(sync_redis, bus.keys) == {job: "queued"}


async def test_warns_when_eviction_policy_is_not_noeviction(fresh_server: RedisProcess, caplog):
    """At start the worker logs a warning when maxmemory-policy would let Redis evict leases."""
    async with Bus.from_url(fresh_server.url, tag="evict") as bus:
        await bus.redis.config_set("maxmemory-policy", "allkeys-lru")
        with caplog.at_level(logging.WARNING, logger="echomq"):
            async with running(Worker(bus, lambda job: None)):
                await eventually(lambda: _events(caplog, "redis.eviction_policy"), what="the warning")
    [record] = _events(caplog, "redis.eviction_policy")
    assert record.levelno == logging.WARNING
    assert record.fields["policy"] == "allkeys-lru"


async def test_no_eviction_warning_with_noeviction(bus, caplog):
    """With maxmemory-policy noeviction (the test servers' setting) the worker does not warn."""
    with caplog.at_level(logging.INFO, logger="echomq"):
        async with running(Worker(bus, lambda job: None)):
            await eventually(lambda: _events(caplog, "worker.started"), what="worker.started")
    assert not _events(caplog, "redis.eviction_policy")


async def test_handler_result_type_of_finish_value_stale_is_counted(bus):
    """A handler whose own finish was refused (Finish.STALE) is counted stale, not completed."""

    async def handler(job):
        return Finish.STALE

    job = await _enqueue(bus)
    async with running(Worker(bus, handler)) as worker:
        await eventually(lambda: worker.counts.stale == 1, what="stale counted")
    assert worker.processed == 0
    assert await job_state(bus, job) == "active"  # it did not finish: the sweep returns it after the lease


async def test_runs_where_config_is_disabled(caplog):
    """On a server with CONFIG renamed away (managed Redis), the worker skips the check and still works."""
    with RedisProcess(appendonly=False, extra=("--rename-command", "CONFIG", "")) as server:
        async with Bus.from_url(server.url, tag="noconfig") as bus:
            job = await _enqueue(bus)
            with caplog.at_level(logging.DEBUG, logger="echomq"):
                async with running(Worker(bus, lambda job: b"ok")):
                    await _until_state(bus, job, "done")
    assert _events(caplog, "redis.config_unavailable")
    assert not _events(caplog, "redis.eviction_policy")
