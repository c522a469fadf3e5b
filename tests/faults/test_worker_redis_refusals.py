"""A worker outlives Redis refusing its commands (OOM under noeviction): it backs off and goes on."""

from __future__ import annotations

import asyncio
import logging

from echomq import Bus, Worker, ids
from tests.support.workers import eventually, state_is


def _events(caplog, event):
    return [record for record in caplog.records if getattr(record, "event", None) == event]


async def test_worker_keeps_going_while_redis_is_out_of_memory(fresh_server, caplog):
    """While Redis refuses writes (maxmemory reached, noeviction) the worker backs off, then goes on."""
    async with Bus.from_url(fresh_server.url, tag="oom") as bus:
        job = ids.mint("JOB")
        await bus.enqueue(job, lane="L", payload=b"p")
        await bus.redis.config_set("maxmemory", "1")  # every write that may grow memory: -OOM

        async def handler(job):
            return b"ok"

        worker = Worker(bus, handler, sweep_every_s=0.5)
        with caplog.at_level(logging.WARNING, logger="echomq"):
            task = asyncio.create_task(worker.run())

            def refused_or_ended():
                return bool(_events(caplog, "worker.redis_error")) or task.done()

            try:
                await eventually(refused_or_ended, 20, "a refusal")
                await asyncio.sleep(1.0)  # a few more refused rounds
                assert not task.done(), task.exception() if task.done() else None
                assert await state_is(bus, job, "queued")
                await bus.redis.config_set("maxmemory", "0")  # memory is back
                await eventually(lambda: state_is(bus, job, "done"), 20, "the job completed")
            finally:
                worker.stop()
                await asyncio.wait_for(task, 30)
        assert worker.processed == 1
