"""Lost replies of delete_dead, for real: the script ran in Redis but its reply never reached the client,
which sent the call again. The retry must tell the truth (the dead letter is deleted already) and
change nothing: one deletion counted, the tombstone left once.

Two ways to lose the reply: a redis-server SIGSTOPped for longer than the client's socket timeout (the
call runs when it resumes, its reply goes to a connection the client gave up on), and the loopback proxy
(:mod:`echomq.testing.proxy`) swallowing the reply of a call that reached Redis.
"""

from __future__ import annotations

import asyncio
import os
import signal

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from echomq import Bus, Deletion, ids
from echomq.scripts import KEY_COUNTS, source
from echomq.testing.proxy import Proxy
from tests.faults.test_lost_replies import PAUSE_S, SOCKET_TIMEOUT_S, bus_on, counters
from tests.support.pausing import (
    pause,
    signal_server,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)
from tests.support.workers import eventually


async def _dead_letter(bus: Bus) -> str:
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "boom")
    return job


async def test_a_delete_whose_reply_is_lost_in_a_pause_answers_already(server):
    """A delete in flight across a pause: redis-py's retry runs after the first call and answers
    ALREADY; the job was deleted once and its tombstone says dead."""
    async with bus_on(server) as bus:
        job = await _dead_letter(bus)
        pause(server, PAUSE_S)
        assert await bus.delete_dead(job) is Deletion.ALREADY
        assert counters(server, bus).get("deleted") == 1
        info = await bus.inspect(job)
        assert (info.state.value, info.trimmed) == ("dead", True)
        assert await bus.dead_jobs() == []


async def test_a_delete_whose_reply_the_proxy_swallows_answers_already(server):
    """The delete reaches a paused Redis through the proxy; the proxy then swallows everything (a
    partition) and Redis resumes and runs it. Once the link is back, the client's retry answers
    ALREADY, and the deletion was counted once."""
    tag = f"lostdel{os.getpid()}"
    with Proxy(server.port) as proxy:
        client = redis.asyncio.Redis(
            host="127.0.0.1", port=proxy.port, socket_timeout=SOCKET_TIMEOUT_S, retry=Retry(NoBackoff(), 40)
        )
        async with Bus(client, tag=tag) as bus, Bus.from_url(server.url, tag=tag) as direct:
            for name in KEY_COUNTS:  # loaded: the call in flight is the script itself
                await bus.redis.script_load(source(name))
            job = await _dead_letter(direct)
            assert (await bus.stats()).dead == 1  # its connections open before the pause (see bus_on)
            signal_server(server, signal.SIGSTOP)
            call = asyncio.create_task(bus.delete_dead(job))
            await asyncio.sleep(0.2)  # the call is sent, and waits in the stopped server's socket
            proxy.cut("blackhole")
            signal_server(server, signal.SIGCONT)
            await eventually(lambda: counters(server, direct).get("deleted") == 1, 10, "the delete ran")
            await asyncio.sleep(SOCKET_TIMEOUT_S)  # the client gave up on that reply
            proxy.restore()
            assert await asyncio.wait_for(call, 30) is Deletion.ALREADY
            assert counters(server, direct).get("deleted") == 1
            assert (await direct.inspect(job)).state.value == "dead"
            assert await direct.dead_jobs() == []
