"""Periodic jobs with no leader, for real: three `echomq schedule` processes on hosts whose clocks disagree
(the test skews two of them by a minute and a half each way) enqueue every tick of a 250 ms interval
once; one is SIGKILLed mid-run and the other two carry on with no tick lost or doubled. And lost
replies: a step whose enqueue ran but whose reply was lost in a Redis pause answers DUPLICATE on its
retry (redis-py's, or the next step's), and the tick is enqueued once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from echomq import Admission, Bus, RedisUnavailable, Schedule, Scheduler, ids
from echomq.scripts import KEY_COUNTS, source
from echomq.testing.server import RedisProcess
from tests.support.pausing import (
    pause,
    signal_server,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)

ROOT = Path(__file__).resolve().parents[2]
EVERY_MS = 250
BEAT = Schedule(name="beat", lane="beats", cron=f"@every {EVERY_MS}ms", payload=b"tick")
_TICK_LINE = re.compile(r"event=periodic\.tick schedule=beat tick=(\d+) job=(\w+) admission=(\w+)")


def start_scheduler(url: str, tag: str, log: Path, skew_ms: int) -> subprocess.Popen[bytes]:
    """`echomq schedule` in a process of its own, its host clock skewed by ``skew_ms``, logging every
    tick it submits (DEBUG) to ``log``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", ECHOMQ_CLOCK_SKEW_MS=str(skew_ms))
    command = [
        *(sys.executable, "-m", "echomq.cli", "--redis-url", url, "--tag", tag, "--log-level", "DEBUG"),
        *("schedule", "beat", f"@every {EVERY_MS}ms", "--lane", "beats", "--payload", "tick"),
        *("--catch-up-ms", "10000"),
    ]
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def submitted(log: Path) -> list[tuple[int, str, str]]:
    """The (tick, job, admission) of every tick a scheduler's log says it submitted."""
    return [(int(t), job, a) for t, job, a in _TICK_LINE.findall(log.read_text())]


def server_now(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


async def until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_three_schedulers_enqueue_each_tick_once_and_survive_a_sigkill(redis_server, tag, tmp_path):
    """Three scheduler processes, one SIGKILLed mid-run: the lane holds every tick from the first window
    to the last, each once, under the schedule's own id; every id any process submitted is one of those
    (skewed hosts mint the same ids), and ticks go on being enqueued after the kill."""
    client = redis.Redis.from_url(redis_server.url)
    lane = Bus.from_url(redis_server.url, tag=tag).keys.lane("beats")
    stats = Bus.from_url(redis_server.url, tag=tag).keys.stats
    logs = [tmp_path / f"scheduler-{i}.log" for i in range(3)]
    skews = [0, 90_000, -90_000]
    procs = [start_scheduler(redis_server.url, tag, log, skew) for log, skew in zip(logs, skews, strict=True)]

    def last_tick() -> int:
        newest = client.zrange(lane, -1, -1)
        return ids.timestamp_ms(newest[0].decode()) if newest else 0

    try:
        started = server_now(client)
        await until(lambda: all(submitted(log) for log in logs), 60, "every scheduler submitted ticks")
        await until(lambda: last_tick() >= started + 3_000, 60, "three seconds of ticks")
        procs[0].send_signal(signal.SIGKILL)
        assert procs[0].wait(10) == -signal.SIGKILL
        killed_at = server_now(client)
        await until(lambda: last_tick() >= killed_at + 3_000, 60, "three seconds of ticks after the kill")
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(30) for proc in procs[1:]] == [0, 0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    jobs = [m.decode() for m in client.zrange(lane, 0, -1)]
    ticks = [ids.timestamp_ms(job) for job in jobs]
    assert ticks == list(range(ticks[0], ticks[-1] + 1, EVERY_MS)), "a tick was lost or doubled"
    assert jobs == [BEAT.tick_id(tick) for tick in ticks]
    counts = {k.decode(): int(v) for k, v in client.hgetall(stats).items()}
    assert counts["admitted"] == len(jobs)
    lines = [submitted(log) for log in logs]
    assert {job for per_process in lines for _, job, _ in per_process} <= set(jobs)
    for survivor in lines[1:]:  # each survivor went on submitting after the kill
        assert any(tick > killed_at for tick, _, _ in survivor)
    answers = [a for per_process in lines for *_, a in per_process]
    assert "conflict" not in answers
    assert counts["duplicate"] >= answers.count("duplicate") > 0  # the others submitted the same ids
    assert counts["admitted"] >= answers.count("admitted")  # (the killed one may not have logged its last)
    assert ticks[-1] > killed_at
    client.close()


# --- lost replies ------------------------------------------------------------------------------------------

SOCKET_TIMEOUT_S = 0.5
PAUSE_S = 2.0
HOURLY = Schedule(name="hourly", lane="hours", every_ms=3_600_000, payload=b"h")


class PausingBus(Bus):
    """A bus that, once armed, SIGSTOPs its server just before its next enqueue_many is sent (after the
    step read the server's clock), for ``seconds`` (None: the test continues it)."""

    def __init__(self, client: redis.asyncio.Redis, tag: str, server: RedisProcess, seconds: float | None):
        super().__init__(client, tag)
        self.server, self.seconds, self.armed = server, seconds, False

    async def enqueue_many(self, new_jobs: Any) -> list[Admission]:
        if self.armed:
            self.armed = False
            pause(self.server, self.seconds)
        return await super().enqueue_many(new_jobs)


@contextlib.asynccontextmanager
async def pausing_bus(
    server: RedisProcess, seconds: float | None, retries: int | None
) -> AsyncIterator[PausingBus]:
    """A PausingBus whose client gives up on a reply after SOCKET_TIMEOUT_S (redis-py's default Retry of
    a ``Redis(host=...)`` client, or ``retries`` retries)."""
    options: dict[str, Any] = {"socket_timeout": SOCKET_TIMEOUT_S}
    if retries is not None:
        options["retry"] = Retry(NoBackoff(), retries)
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, **options)
    async with PausingBus(client, f"lost{os.getpid()}", server, seconds) as bus:
        for name in KEY_COUNTS:  # loaded: an EVALSHA in flight would only run into NOSCRIPT
            await bus.redis.script_load(source(name))
        # Connections open before the pause (the pool's, and the bus's own for scripts: a stats call): a
        # call that has to connect during it fails in the handshake, before it is sent, losing nothing.
        await asyncio.gather(*(bus.redis.ping() for _ in range(8)))
        await bus.stats(lanes=0)
        yield bus


def counters(server: RedisProcess, bus: Bus) -> dict[str, int]:
    client = redis.Redis.from_url(server.url)
    try:
        return {k.decode(): int(v) for k, v in client.hgetall(bus.keys.stats).items()}
    finally:
        client.close()


async def test_a_step_whose_reply_is_lost_is_answered_duplicate_by_the_clients_retry(server):
    """The step's enqueue runs when Redis resumes, its reply lost; redis-py's retry is answered (the
    retry's DUPLICATE, or ADMITTED if Redis ran the retry first), and the tick is enqueued once."""
    async with pausing_bus(server, PAUSE_S, retries=None) as bus:
        bus.armed = True
        report = await Scheduler(bus, [HOURLY]).tick_once()
        [tick] = report.ticks
        assert tick.admission in (Admission.DUPLICATE, Admission.ADMITTED)
        seen = counters(server, bus)
        assert (seen["admitted"], seen["duplicate"] >= 1) == (1, True)  # the reply was lost and retried
        assert (await bus.inspect(tick.job)).state.value == "queued"
        assert await bus.redis.zrange(bus.keys.lane("hours"), 0, -1) == [tick.job.encode()]


async def test_a_failed_step_whose_enqueue_ran_is_a_duplicate_at_the_next_step(server):
    """No client retry: the step raises RedisUnavailable though its enqueue ran once Redis resumed; it
    recorded nothing, so the next step submits the tick again and is answered DUPLICATE."""
    async with pausing_bus(server, None, retries=0) as bus:
        scheduler = Scheduler(bus, [HOURLY])
        bus.armed = True
        with pytest.raises(RedisUnavailable):
            await scheduler.tick_once()
        signal_server(server, signal.SIGCONT)
        await until(lambda: counters(server, bus).get("admitted") == 1, 10, "the lost enqueue ran")
        report = await scheduler.tick_once()
        assert [
            t.admission for t in report.ticks if t.at_ms == report.server_ms // 3_600_000 * 3_600_000
        ] == [Admission.DUPLICATE]
        assert counters(server, bus)["admitted"] == len(report.ticks)
        jobs = await bus.redis.zrange(bus.keys.lane("hours"), 0, -1)
        assert [j.decode() for j in jobs] == [t.job for t in report.ticks]
