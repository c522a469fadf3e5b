"""What idle workers still do although they sweep only when a step is due (echomq.worker.fetcher): reclaim
a killed worker's job at its lease deadline, claim a job whose wake token was lost, trim finished rows
once the bus goes idle. Every worker here blocks for the 600 s idle cap unless a reply told it of
something due sooner, so each outcome within seconds comes from what it learned, not from a timer.
"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import redis.asyncio

from echomq import Bus, Settings, Worker, ids
from echomq.worker.fetcher import IDLE_CAP_S
from tests.support.probe import Probe
from tests.support.workers import cli, eventually, running, state_is, stop_process, wait_for_marker

LEASE_MS = 1500
SWEEP_EVERY_S = 0.5


def _blocked(client, count: int) -> bool:
    """True when at least ``count`` connections are blocked in BLPOP (idle workers)."""
    entries = client.client_list()
    return sum(1 for e in entries if e.get("cmd") == "blpop" and "b" in e.get("flags", "")) >= count


async def noop(job) -> None:
    """Finishes at once."""


@pytest.mark.slow
async def test_an_idle_worker_reclaims_a_killed_workers_job_at_its_lease_deadline(
    fresh_server, tmp_path, monkeypatch
):
    """Two idle worker processes; the one that claims a job is SIGKILLed mid-run. The other, idle all along
    (its cap 600 s away), woke to the claim's token, learned the lease deadline from its empty claim, and
    reclaims the job within lease + sweep_every_s after the last renewal (2 s of slack for a loaded
    machine), then runs it."""
    client = redis.Redis(port=fresh_server.port)
    argv = ["--tag", "watch", "worker", "tests.faults.handlers:slow_first_attempt"]
    argv += ["--lease-ms", str(LEASE_MS), "--sweep-every", str(SWEEP_EVERY_S)]
    workers = [cli(fresh_server.url, *argv, markers=tmp_path) for _ in range(2)]
    try:
        async with Bus.from_url(fresh_server.url, tag="watch") as bus:
            await eventually(lambda: _blocked(client, 2), 30, "two idle workers")
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"x")
            await wait_for_marker(tmp_path / f"{job}.1.started")
            owner = (await bus.inspect(job)).owner
            assert owner is not None
            victim = next(w for w in workers if owner.endswith(f":{w.pid}"))
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait(10)
            deadline_ms = (await bus.inspect(job)).deadline_ms  # no renewal after the kill
            assert deadline_ms is not None
            await eventually(lambda: state_is(bus, job, "done"), 30, "the job reclaimed and run again")
            started_again = (tmp_path / f"{job}.2.started").stat().st_mtime
            assert started_again - deadline_ms / 1000 < SWEEP_EVERY_S + 2.0
            assert started_again - deadline_ms / 1000 < IDLE_CAP_S / 10
            assert (await bus.stats()).counters["reclaimed"] == 1
    finally:
        for worker in workers:
            stop_process(worker)
        client.close()


@pytest.mark.slow
async def test_a_job_whose_wake_token_another_client_took_is_claimed_when_the_block_ends(
    redis_server, tag, sync_redis
):
    """A token popped by a client that is not a worker (so no claim ran behind it) leaves a queued job
    unannounced: the idle worker claims it at the end of its block, the cap (shortened here to 2 s)."""
    done: list[str] = []

    async def handler(job):
        done.append(job.id)

    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        thief = redis.asyncio.Redis.from_url(redis_server.url)
        taken = asyncio.create_task(thief.blpop([bus.keys.wake], timeout=30))  # blocked before the worker
        await eventually(lambda: _blocked(sync_redis, 1), 10, "the other client blocks")
        worker = Worker(bus, handler)
        worker.fetcher.idle_cap_s = 2.0
        async with running(worker):
            await eventually(lambda: _blocked(sync_redis, 2), 10, "the worker blocks too")
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"x")
            assert await taken is not None, "the first client blocked took the token"
            await eventually(lambda: done == [job], 10, "the job claimed at the end of the block")
        await thief.aclose()


@pytest.mark.slow
async def test_an_idle_worker_trims_the_last_finished_rows_once_they_pass_their_ttl(
    redis_server, tag, sync_redis
):
    """With a 1 s result ttl and every job done, the idle worker sweeps when the last rows pass their ttl
    (it learned when from its sweeps): the done set empties, with no finish left to trim it."""
    settings = Settings(result_ttl_ms=1000)
    async with Bus.from_url(redis_server.url, tag=tag, settings=settings) as bus:
        probe = Probe(sync_redis, bus.keys)
        worker = Worker(bus, noop, lease_ms=LEASE_MS, sweep_every_s=SWEEP_EVERY_S)
        async with running(worker):
            await eventually(lambda: _blocked(sync_redis, 1), 10, "the worker blocks")
            jobs = [ids.mint("JOB") for _ in range(5)]
            for job in jobs:
                await bus.enqueue(job, lane="L", payload=b"x")
            for job in jobs:
                await eventually(lambda job=job: state_is(bus, job, "done"), 10, f"{job} done")
            assert probe.client.zcard(bus.keys.done) > 0
            await eventually(lambda: probe.client.zcard(bus.keys.done) == 0, 15, "every row trimmed")
            assert (await bus.inspect(jobs[0])).trimmed
