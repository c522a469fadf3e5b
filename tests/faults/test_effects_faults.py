"""Effects with the completion under faults: a lost reply, a worker killed before its effects landed, and
a worker stopped past its lease whose late effects must not apply. In every case each job's effects
apply exactly once: the run that completes it applies them, no other run does."""

from __future__ import annotations

import os
import signal

import pytest
import redis

from echomq import Bus, Completion, Effects, Finish, Job, Worker, ids
from echomq.worker import faults
from tests.faults.effects_handlers import effects_after_first_revoked, effects_at_once, log_key, runs_key
from tests.faults.test_lost_replies import PAUSE_S, bus_on, counters
from tests.support import invariants
from tests.support.pausing import (
    pause,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)
from tests.support.workers import cli, eventually, job_state, running, stop_process, wait_for_marker


def _applied(client: redis.Redis, job: str) -> tuple[bytes | None, list[bytes]]:
    """The job's effects as they stand: its run counter, and the attempts that applied theirs."""
    return client.get(runs_key(job)), client.lrange(log_key(job), 0, -1)  # type: ignore[return-value]


async def test_a_complete_with_effects_whose_reply_is_lost_applies_them_once(server):
    """A complete with effects in flight across a pause: redis-py's retry answers DONE, the effects
    applied once, the job completed once and no stale refusal counted."""
    async with bus_on(server) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="L", payload=b"p")
        [claim] = await bus.claim(lease_ms=30_000)
        fx = Effects().incrby(runs_key(job), 1).rpush(log_key(job), claim.token)
        pause(server, PAUSE_S)
        assert await bus.complete(claim, b"ok", effects=fx) is Finish.DONE
        seen = counters(server, bus)
        assert (seen.get("completed"), seen.get("stale", 0)) == (1, 0)
        with redis.Redis(port=server.port) as client:
            assert _applied(client, job) == (b"1", [b"1"])
        assert (await bus.inspect(job)).result == b"ok"


@pytest.mark.slow
async def test_a_workers_complete_with_effects_whose_reply_is_lost_applies_them_once(server):
    """A worker whose handler's complete with effects is sent into a pause (no redis-py retry: the
    worker retries after RedisUnavailable): the job is done once, its effects applied once."""
    paused: list[str] = []

    async def handler(job: Job) -> Completion:
        if not paused:
            paused.append(job.id)
            pause(server, PAUSE_S)  # the complete below is sent while Redis is stopped
        return Completion(b"ran", Effects().incrby(runs_key(job.id), 1).rpush(log_key(job.id), job.attempt))

    async with bus_on(server, retries=0) as bus:
        job = ids.mint("JOB")
        async with running(Worker(bus, handler, concurrency=1, lease_ms=30_000, sweep_every_s=0.5)) as worker:
            await bus.enqueue(job, lane="L", payload=b"p", max_attempts=1)
            await eventually(lambda: worker.counts.completed == 1, 60, "the job completed")
        assert paused == [job]
        info = await bus.inspect(job)
        assert (info.state.value, info.result, info.tries) == ("done", b"ran", 1)
        with redis.Redis(port=server.port) as client:
            assert _applied(client, job) == (b"1", [b"1"])
        seen = counters(server, bus)
        assert (seen.get("completed"), seen.get("stale", 0)) == (1, 0)


BOUNDARIES = [
    ("worker.mid_handler", "effects_after_first_revoked", ["1.started"]),
    ("worker.before_ack", "effects_at_once", ["1.finished", "1.started"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("point", "handler", "first_marks"), BOUNDARIES, ids=[b[0] for b in BOUNDARIES])
async def test_a_worker_killed_before_its_effects_landed_leaves_none(
    redis_server, tag, tmp_path, sync_redis, monkeypatch, point, handler, first_marks
):
    """SIGKILL mid-handler, or after the handler returned its effects and before they were sent: no
    effect of that run exists; the next claimant applies its own, once."""
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"p", max_attempts=5)
        doomed = cli(
            redis_server.url,
            "--tag", tag, "worker", f"tests.faults.effects_handlers:{handler}",
            "--lease-ms", "900", "--sweep-every", "0.3",
            markers=tmp_path,
            env_extra={faults.ENV: point},
        )  # fmt: skip
        try:
            assert doomed.wait(30) == -signal.SIGKILL
        finally:
            stop_process(doomed)
        assert await job_state(bus, job) == "active"
        assert sorted(p.name.removeprefix(f"{job}.") for p in tmp_path.iterdir()) == first_marks
        assert _applied(sync_redis, job) == (None, [])  # the killed run left no effect

        monkeypatch.setenv("ECHOMQ_TEST_MARKERS", str(tmp_path))
        monkeypatch.delenv(faults.ENV, raising=False)
        async with running(Worker(bus, effects_at_once, lease_ms=900, sweep_every_s=0.3)) as second:
            await eventually(lambda: second.processed == 1, 30, "the reclaimed job completed")
        info = await bus.inspect(job)
        assert (info.state.value, info.attempts, info.result) == ("done", 2, b"attempt 2")
        assert _applied(sync_redis, job) == (b"1", [b"2"])
        assert invariants.check(sync_redis, bus.keys) == {job: "done"}


@pytest.mark.slow
async def test_a_worker_stopped_past_its_lease_applies_none_of_its_effects(
    redis_server, tag, tmp_path, sync_redis, monkeypatch
):
    """A worker process stopped (SIGSTOP) mid-handler past its lease: another worker re-claims the job and
    applies its effects; continued, the first run returns its effects all the same, and its complete is
    refused as stale with none of them applied."""
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="PLRlane", payload=b"p", max_attempts=5)
        first = cli(
            redis_server.url,
            "--tag", tag, "worker", "tests.faults.effects_handlers:effects_after_first_revoked",
            "--lease-ms", "900", "--sweep-every", "0.3",
            markers=tmp_path,
        )  # fmt: skip
        try:
            await wait_for_marker(tmp_path / f"{job}.1.started", first)
            os.kill(first.pid, signal.SIGSTOP)  # the whole process stalls: its lease keeper too
            monkeypatch.setenv("ECHOMQ_TEST_MARKERS", str(tmp_path))
            second = Worker(bus, effects_after_first_revoked, lease_ms=900, sweep_every_s=0.3)
            async with running(second):
                await eventually(lambda: second.processed == 1, 30, "the re-claimed job completed")
            assert _applied(sync_redis, job) == (b"1", [b"2"])
            os.kill(first.pid, signal.SIGCONT)  # its keeper finds the lease revoked; the handler returns

            async def refused() -> bool:
                return (await bus.stats()).counters.get("stale", 0) >= 1

            await wait_for_marker(tmp_path / f"{job}.1.finished", first)
            # The refusal is counted by the very script that would have applied the effects.
            await eventually(refused, 30, "the first run's complete was refused")
        finally:
            stop_process(first)
        info = await bus.inspect(job)
        assert (info.state.value, info.attempts, info.result) == ("done", 2, b"attempt 2")
        assert _applied(sync_redis, job) == (b"1", [b"2"])
        assert (await bus.stats()).counters["completed"] == 1
        assert invariants.check(sync_redis, bus.keys) == {job: "done"}
