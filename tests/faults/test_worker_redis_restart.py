"""A worker outlives its Redis: killed with SIGKILL and restarted on its AOF, the queue goes on."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis

from echomq import Bus, RedisUnavailable, Worker, ids
from echomq.testing.server import RedisProcess
from tests.support import invariants
from tests.support.workers import eventually, running, state_is


@pytest.mark.slow
async def test_worker_keeps_going_after_redis_is_killed_and_restarted(fresh_server):
    """Jobs admitted before a Redis SIGKILL survive on the AOF, and the same worker completes new ones."""
    async with Bus.from_url(fresh_server.url, tag="restart") as bus:
        parked = ids.mint("JOB")
        await bus.enqueue(parked, lane="L", payload=b"parked", delay_ms=60_000)

        async def handler(job):
            return b"ok:" + job.payload

        async with running(Worker(bus, handler, sweep_every_s=0.5)) as worker:
            await asyncio.sleep(0.3)
            fresh_server.kill()
            await asyncio.sleep(1.0)  # the worker's loop finds the server gone and backs off
            fresh_server.start()  # same port, same data: the AOF (appendfsync always) is replayed
            fresh = ids.mint("JOB")
            for _ in range(100):  # connections reconnect on their next call: the bus's own for its
                try:  # scripts (enqueue), and the pool's (inspect); a repeated enqueue is a duplicate
                    await bus.enqueue(fresh, lane="L", payload=b"fresh")
                    await bus.inspect(fresh)
                    break
                except RedisUnavailable:
                    await asyncio.sleep(0.1)
            await eventually(lambda: state_is(bus, fresh, "done"), 30, "the new job completed")
        assert worker.processed == 1
        assert (await bus.inspect(fresh)).result == b"ok:fresh"
        client = redis.Redis.from_url(fresh_server.url)
        try:
            assert invariants.check(client, bus.keys) == {parked: "delayed", fresh: "done"}
        finally:
            client.close()


def _events(caplog, event):
    return [record for record in caplog.records if getattr(record, "event", None) == event]


async def test_worker_started_before_its_redis_checks_the_eviction_policy_once_redis_is_up(caplog):
    """A worker started while Redis is down still warns about maxmemory-policy once Redis answers."""
    server = RedisProcess(appendonly=False, extra=("--maxmemory-policy", "allkeys-lru"))
    try:
        async with Bus.from_url(server.url, tag="late") as bus:
            with caplog.at_level(logging.DEBUG, logger="echomq"):
                async with running(Worker(bus, lambda job: b"ok", sweep_every_s=0.5)):
                    await eventually(
                        lambda: _events(caplog, "worker.redis_error"), 20, "the worker saw no Redis"
                    )
                    server.start()
                    job = ids.mint("JOB")
                    await bus.enqueue(job, lane="L", payload=b"p")
                    await eventually(lambda: state_is(bus, job, "done"), 20, "the worker got going")
                    await eventually(lambda: _events(caplog, "redis.eviction_policy"), 5, "the warning")
        [warning] = _events(caplog, "redis.eviction_policy")
        assert warning.fields["policy"] == "allkeys-lru"
    finally:
        server.close()
