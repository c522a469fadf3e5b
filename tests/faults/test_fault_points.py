"""The named fault points of the worker's job cycle (echomq.worker.faults): armed by ECHOMQ_FAULTS in a real
worker process, each one kills it with SIGKILL at its boundary, and the job is still finished exactly
once, by another worker after the lease expires."""

from __future__ import annotations

import signal

import pytest

from echomq import Bus, Worker, ids
from echomq.worker import faults
from tests.faults.handlers import noop, slow_first_attempt
from tests.support import invariants
from tests.support.workers import cli, eventually, job_state, running, stop_process

# (point, the handler the killed worker runs, what the first delivery left behind)
BOUNDARIES = [
    ("worker.after_claim", "slow_first_attempt", []),
    ("worker.mid_handler", "slow_first_attempt", ["1.started"]),
    ("worker.before_ack", "noop", ["1.finished"]),
    ("worker.mid_extend", "slow_first_attempt", ["1.started"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "handler", "first_marks"), BOUNDARIES, ids=[b[0] for b in BOUNDARIES])
async def test_a_worker_killed_at_each_boundary_loses_nothing_and_finishes_once(
    redis_server, tag, tmp_path, sync_redis, monkeypatch, point, handler, first_marks
):
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"guess", max_attempts=5)
        doomed = cli(
            redis_server.url,
            "--tag", tag, "worker", f"tests.faults.handlers:{handler}",
            "--lease-ms", "900", "--sweep-every", "0.3",
            markers=tmp_path,
            env_extra={faults.ENV: point},
        )  # fmt: skip
        try:
            assert doomed.wait(30) == -signal.SIGKILL
        finally:
            stop_process(doomed)
        assert await job_state(bus, job) == "active"  # claimed under token 1, never finished
        assert sorted(p.name.removeprefix(f"{job}.") for p in tmp_path.iterdir()) == first_marks

        monkeypatch.setenv("ECHOMQ_TEST_MARKERS", str(tmp_path))
        monkeypatch.delenv(faults.ENV, raising=False)
        finisher = slow_first_attempt if handler == "slow_first_attempt" else noop
        async with running(Worker(bus, finisher, lease_ms=900, sweep_every_s=0.3)) as second:
            await eventually(lambda: second.processed == 1, 30, "the reclaimed job completed")
        info = await bus.inspect(job)
        assert (info.state.value, info.attempts) == ("done", 2)
        counters = (await bus.stats()).counters
        assert (counters["completed"], counters["reclaimed"]) == (1, 1)
        assert invariants.check(sync_redis, bus.keys) == {job: "done"}
