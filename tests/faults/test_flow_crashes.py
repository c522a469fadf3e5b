"""A worker process killed with SIGKILL while it holds a capped lane's every place: the count of the
lane's active jobs ('lane-active') stays the truth, the sweep frees the places when the leases run out,
and the lane comes back: every job completes once, never more than the cap of them running at once."""

from __future__ import annotations

import asyncio

import pytest

from echomq import Bus, NewJob, Worker, ids
from echomq.testing.invariants import gate_state
from tests.support import invariants
from tests.support.workers import cli, eventually, running, stop_process, wait_for_marker


@pytest.mark.slow
async def test_a_killed_worker_holding_a_capped_lane_loses_no_job_and_no_place(
    redis_server, tag, tmp_path, sync_redis
):
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        capped = [ids.mint("JOB") for _ in range(6)]
        free = [ids.mint("JOB") for _ in range(2)]
        await bus.set_lane_cap("A", 2)
        await bus.enqueue_many(
            [NewJob(job, "A", b"") for job in capped] + [NewJob(job, "B", b"") for job in free]
        )

        first = cli(
            redis_server.url,
            "--tag", tag, "worker", "tests.faults.handlers:slow_first_attempt",
            "--concurrency", "6", "--lease-ms", "1000", "--sweep-every", "0.3",
            markers=tmp_path,
        )  # fmt: skip
        try:
            for job in free:
                await wait_for_marker(tmp_path / f"{job}.1.started", first)
            await eventually(lambda: len(list(tmp_path.glob("*.1.started"))) == 4, 30, "two of A started")
            # Its two places taken: A is held, the other four wait, although the worker has slots free.
            assert sync_redis.hget(bus.keys.lane_active, "A") == b"2"
            assert sync_redis.sismember(bus.keys.held, "A")
            assert sync_redis.zcard(f"{bus.keys.prefix}lane:A") == 4
            first.kill()  # SIGKILL: its four jobs stay active, A's two still counted against the cap
            first.wait(10)
        finally:
            stop_process(first)
        assert invariants.check(sync_redis, bus.keys)
        assert gate_state(sync_redis, bus.keys) == []

        running_a, peak = 0, 0

        async def handler(job):
            nonlocal running_a, peak
            if job.lane == "A":
                running_a += 1
                peak = max(peak, running_a)
            await asyncio.sleep(0.02)
            if job.lane == "A":
                running_a -= 1
            return b"done"

        async with running(Worker(bus, handler, concurrency=8, lease_ms=1000, sweep_every_s=0.3)) as second:
            await eventually(lambda: second.processed == 8, 30, "every job, the killed worker's too")

        assert peak <= 2
        states = invariants.check(sync_redis, bus.keys)
        assert all(states[job] == "done" for job in capped + free)
        assert gate_state(sync_redis, bus.keys) == []
        assert sync_redis.hgetall(bus.keys.lane_active) == {}
        assert sync_redis.scard(bus.keys.held) == 0
        counters = (await bus.stats()).counters
        assert counters["completed"] == 8
        assert counters["reclaimed"] == 4
