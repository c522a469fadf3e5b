"""SIGTERM to a worker process: in-flight jobs are released at once, so a restart does not wait the lease."""

from __future__ import annotations

import asyncio
import signal

import pytest

from echomq import Bus, ids
from tests.support import invariants
from tests.support.workers import cli, eventually, job_state, state_is, stop_process, wait_for_marker

LEASE_MS = 60_000  # far longer than anything below may take: the restart must not wait for it


def _worker(url, tag, markers, *extra):
    return cli(
        url,
        "--tag", tag, "worker", "tests.faults.handlers:slow_first_attempt",
        "--lease-ms", str(LEASE_MS), *extra,
        markers=markers,
    )  # fmt: skip


@pytest.mark.slow
async def test_sigterm_releases_the_job_and_a_restart_completes_it(redis_server, tag, tmp_path, sync_redis):
    """SIGTERM: the worker exits within its grace, the job is queued again, a new worker completes it."""
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"guess")
        first = _worker(redis_server.url, tag, tmp_path, "--grace", "1")
        try:
            await wait_for_marker(tmp_path / f"{job}.1.started", first)
            first.send_signal(signal.SIGTERM)
            assert first.wait(15) == 0  # grace 1 s, then release: far sooner than the 60 s lease
        finally:
            stop_process(first)
        info = await bus.inspect(job)
        assert info.state.value == "queued"
        assert info.location == bus.keys.lane("PLRlane")
        assert info.tries == 0  # a released try is not counted
        assert (await bus.stats()).counters["released"] == 1
        assert invariants.check(sync_redis, bus.keys) == {job: "queued"}

        second = _worker(redis_server.url, tag, tmp_path)
        try:
            # Well inside the 60 s lease: the restart took the released job, it did not wait for expiry.
            await eventually(lambda: state_is(bus, job, "done"), 20, "the restarted worker completed")
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(15)
            stop_process(second)
        assert (await bus.inspect(job)).attempts == 2
        assert (await bus.stats()).counters["completed"] == 1


@pytest.mark.slow
async def test_second_signal_releases_without_waiting_for_grace(redis_server, tag, tmp_path):
    """A second SIGTERM during a long grace period releases in-flight jobs and exits at once."""
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"guess")
        proc = _worker(redis_server.url, tag, tmp_path, "--grace", "60")
        try:
            await wait_for_marker(tmp_path / f"{job}.1.started", proc)
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)  # two signals, not one: the kernel merges a signal still pending
            assert proc.poll() is None  # the first one waits for the grace period
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(15) == 0  # well before the 60 s grace
        finally:
            stop_process(proc)
        assert await job_state(bus, job) == "queued"
