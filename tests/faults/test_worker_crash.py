"""A worker process killed with SIGKILL mid-job: its job is reclaimed, completed once, never twice."""

from __future__ import annotations

import subprocess
import sys

import pytest

from echomq import Bus, Worker, ids
from tests.faults.handlers import slow_first_attempt
from tests.support import invariants
from tests.support.workers import cli, eventually, job_state, running, stop_process, wait_for_marker

# The first worker's late completion, from a process of its own that knows only the old token.
LATE_COMPLETE = """
import asyncio, sys
from echomq import Bus, Claim
async def main():
    async with Bus.from_url(sys.argv[1], tag=sys.argv[2]) as bus:
        print((await bus.complete(Claim(sys.argv[3], sys.argv[4], token=1), b"late")).value)
asyncio.run(main())
"""


@pytest.mark.slow
async def test_killed_worker_job_is_reclaimed_and_completed_once(
    redis_server, tag, tmp_path, sync_redis, monkeypatch
):
    """SIGKILL mid-job: another worker reclaims after the lease and completes it; the late finish is stale."""
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"guess", max_attempts=5)

        first = cli(
            redis_server.url,
            "--tag", tag, "worker", "tests.faults.handlers:slow_first_attempt",
            "--lease-ms", "1000", "--sweep-every", "0.5",
            markers=tmp_path,
        )  # fmt: skip
        try:
            await wait_for_marker(tmp_path / f"{job}.1.started", first)
            first.kill()  # SIGKILL: no release, no clean-up; the job stays in active under token 1
            first.wait(10)
        finally:
            stop_process(first)
        assert await job_state(bus, job) == "active"

        monkeypatch.setenv("ECHOMQ_TEST_MARKERS", str(tmp_path))
        async with running(Worker(bus, slow_first_attempt, lease_ms=1000, sweep_every_s=0.3)) as second:
            await eventually(lambda: second.processed == 1, 30, "the reclaimed job completed")

        late = subprocess.run(
            [sys.executable, "-c", LATE_COMPLETE, redis_server.url, tag, job, "PLRlane"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert late.stdout.strip() == "stale"

        info = await bus.inspect(job)
        assert info.state.value == "done"
        assert info.attempts == 2
        assert info.result == b"done"
        counters = (await bus.stats()).counters
        assert counters["completed"] == 1
        assert counters["reclaimed"] == 1
        assert counters["stale"] == 1
        runs = sorted(path.name for path in tmp_path.iterdir())
        assert runs == [f"{job}.1.started", f"{job}.2.finished", f"{job}.2.started"]
        assert invariants.check(sync_redis, bus.keys) == {job: "done"}
