"""Idle workers wake when work comes back to the lanes, and at the due time of a delayed job or a retry.

In-process workers on the session server, each on a bus of its own (one client each, as separate
processes would have). A worker is idle when its pickup connection is blocked in BLPOP on the wake list;
the tests wait for that, from the server's client list, before they move any work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict

import pytest

from echomq import Bus, NewJob, Settings, Worker, ids
from echomq.scripts import SyncScripts
from echomq.sweep import report_from_reply, sweep_call
from tests.support.probe import Probe
from tests.support.workers import eventually, running, state_is

HANDLER_S = 0.3  # long enough that one worker cannot drain the lanes before the others would wake
SWEEP_EVERY_S = 30.0  # no worker's own sweep timer fires during a test (their first sweep runs at start)


def _blocked(client, count):
    """True when at least ``count`` connections are blocked in BLPOP (idle workers)."""
    entries = client.client_list()
    return sum(1 for e in entries if e.get("cmd") == "blpop" and "b" in e.get("flags", "")) >= count


async def _crashed_claim(bus, probe, count):
    """``count`` jobs on several lanes, claimed by a worker that then died: in ``active`` for a long
    lease that nobody renews (its expiry is simulated later, when the test chooses)."""
    jobs = [ids.mint("JOB") for _ in range(count)]
    await bus.enqueue_many([NewJob(job, f"PLR{i % 5}", b"x") for i, job in enumerate(jobs)])
    claimed = await bus.claim(count=count, lease_ms=600_000, owner="crashed:1")
    assert len(claimed) == count
    return jobs


async def _idle_workers(redis_server, tag, settings, count, ran_by):
    """``count`` workers of concurrency 2 whose handler records which worker ran each job."""
    workers = []
    for n in range(count):
        bus = Bus.from_url(redis_server.url, tag=tag, settings=settings)

        async def handler(job, n=n):
            ran_by[n].append(job.id)
            await asyncio.sleep(HANDLER_S)

        workers.append(Worker(bus, handler, concurrency=2, sweep_every_s=SWEEP_EVERY_S, owner=f"w{n}"))
    return workers


async def _run_all(workers, body):
    """Run every worker in the background around ``body()``, then stop them and close their buses."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            for worker in workers:
                await stack.enter_async_context(running(worker))
            await body()
    finally:
        for worker in workers:
            await worker.bus.aclose()


async def test_reclaimed_jobs_wake_every_idle_worker(redis_server, tag, sync_redis):
    """After a crash, the one sweep that reclaims N jobs leaves N wake tokens, and the jobs run across
    all four idle workers, not on the one that happened to wake."""
    settings = Settings()
    ran_by: dict[int, list[str]] = defaultdict(list)
    async with Bus.from_url(redis_server.url, tag=tag, settings=settings) as bus:
        probe = Probe(sync_redis, bus.keys)
        jobs = await _crashed_claim(bus, probe, 12)
        workers = await _idle_workers(redis_server, tag, settings, 4, ran_by)

        async def body():
            await eventually(lambda: _blocked(sync_redis, 4), 20, "four idle workers")
            for job in jobs:
                probe.expire(job)  # simulates the dead worker's leases running out
            # The sweep and a read of the wake list in one transaction: no worker pops a token between.
            keys, args = sweep_call(bus)
            pipe = sync_redis.pipeline(transaction=True)
            SyncScripts(sync_redis).run("sweep", keys, args, client=pipe)
            pipe.llen(bus.keys.wake)
            reply, tokens = pipe.execute()
            assert report_from_reply(reply).reclaimed == 12
            assert tokens == 12
            for job in jobs:
                await eventually(lambda job=job: state_is(bus, job, "done"), 30, f"{job} done")

        await _run_all(workers, body)
    assert sorted(job for runs in ran_by.values() for job in runs) == sorted(jobs)
    assert sorted(ran_by) == [0, 1, 2, 3], f"jobs ran on workers {dict(ran_by)}"


async def test_a_worker_that_leaves_jobs_behind_wakes_the_next_idle_worker(redis_server, tag, sync_redis):
    """With a wake cap of one token, a sweep that reclaims many jobs wakes one worker; its full batch
    claim passes the wake-up on, so every idle worker ends up running some of them."""
    settings = Settings(wake_cap=1)
    ran_by: dict[int, list[str]] = defaultdict(list)
    async with Bus.from_url(redis_server.url, tag=tag, settings=settings) as bus:
        probe = Probe(sync_redis, bus.keys)
        jobs = await _crashed_claim(bus, probe, 12)
        workers = await _idle_workers(redis_server, tag, settings, 4, ran_by)

        async def body():
            await eventually(lambda: _blocked(sync_redis, 4), 20, "four idle workers")
            for job in jobs:
                probe.expire(job)  # simulates the dead worker's leases running out
            assert (await bus.sweep()).reclaimed == 12
            for job in jobs:
                await eventually(lambda job=job: state_is(bus, job, "done"), 30, f"{job} done")

        await _run_all(workers, body)
    assert sorted(ran_by) == [0, 1, 2, 3], f"jobs ran on workers {dict(ran_by)}"


def _sweeps(caplog, reason):
    return sum(
        1
        for record in caplog.records
        if getattr(record, "event", None) == "worker.swept" and record.fields.get("reason") == reason  # type: ignore[attr-defined]
    )


PERIOD_S = 6.0  # the workers' sweep_every_s in the punctuality tests: no sweep comes from it while idle


async def _started_while_idle(caplog, sync_redis, worker, schedule, started):
    """Run ``worker`` until it blocks (idle: its next sweep is its cap, 600 s away), ``schedule()`` a job
    due a few seconds later, and wait for the handler to start it; return the sweeps' reasons."""
    caplog.set_level(logging.DEBUG, logger="echomq.worker")
    async with running(worker):
        await eventually(lambda: _sweeps(caplog, "start") == 1, 20, "the first sweep, at start")
        await eventually(lambda: _blocked(sync_redis, 1), 20, "the worker blocks")
        await schedule()
        await eventually(lambda: bool(started), 20, "the job started (long before the idle cap)")
        return [r for r in ("start", "due", "lease", "trim", "idle") for _ in range(_sweeps(caplog, r))]


@pytest.mark.slow
async def test_a_delayed_job_enqueued_while_the_worker_is_idle_starts_at_its_due_time(
    bus, caplog, sync_redis
):
    """A delayed job enqueued while a worker is blocked for its idle cap starts at its due time: the enqueue's
    token wakes the worker, whose claim learns the due time, and one sweep at that time promotes the job."""
    started: list[int] = []

    async def handler(job):
        started.append(_sweeps(caplog, "due"))

    async def schedule():
        await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"later", delay_ms=2000)

    worker = Worker(bus, handler, sweep_every_s=PERIOD_S)
    reasons = await _started_while_idle(caplog, sync_redis, worker, schedule, started)
    assert started == [1], "the job started after the sweep at its due time"
    assert "idle" not in reasons, reasons


@pytest.mark.slow
async def test_a_retry_starts_at_the_end_of_its_backoff_while_the_worker_is_idle(
    redis_server, tag, caplog, sync_redis
):
    """A failed job's retry (backoff 1 to 2 s) starts at its due time although the worker, idle after the
    failure, blocks for its cap: it knows when the retry is due and sweeps then."""
    started: list[int] = []

    async def handler(job):
        if job.attempt == 1:
            raise RuntimeError("try again")
        started.append(_sweeps(caplog, "due"))

    async with Bus.from_url(redis_server.url, tag=tag, settings=Settings(backoff_base_ms=2000)) as bus:

        async def schedule():  # runs and fails at once; its retry is due 1 to 2 s later
            await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"flaky")

        worker = Worker(bus, handler, sweep_every_s=PERIOD_S)
        reasons = await _started_while_idle(caplog, sync_redis, worker, schedule, started)
    assert started == [1], "the retry started after the sweep at its due time"
    assert "idle" not in reasons, reasons
