"""echomq._wire under the asyncio Bus: script calls packed once and sent on the bus's own connection keep
every answer redis-py gave (NOSCRIPT loaded, error replies read past, lost replies and cancellations
retried truthfully) and leave the client's pool to its other callers."""

from __future__ import annotations

import asyncio
import signal

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from echomq import Admission, Bus, NewJob, ScriptError, SyncBus, ids
from echomq.scripts import KEY_COUNTS, source
from tests.support.pausing import (
    pause,
    signal_server,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)
from tests.support.probe import Probe


async def test_a_pool_of_one_still_serves_other_calls(redis_server, tag):
    """On a client whose pool holds one connection, enqueues and other calls interleave and run at once:
    the bus's script calls do not take the pool's only connection away."""
    client = redis.asyncio.Redis.from_url(redis_server.url, max_connections=1)
    async with Bus(client, tag=tag) as bus:
        job = ids.mint("JOB")
        admitted, info_free = await asyncio.gather(bus.enqueue(job, lane="L", payload=b""), bus.redis.ping())
        assert (admitted, info_free) == (Admission.ADMITTED, True)
        assert (await bus.inspect(job)).state.value == "queued"
        assert await bus.enqueue_many([NewJob(ids.mint("JOB"), "L", b"")]) == [Admission.ADMITTED]


async def test_concurrent_enqueues_on_one_bus_are_each_answered(bus, sync_redis):
    """100 concurrent enqueues of 50 ids on one bus: each id admitted once, each other call DUPLICATE."""
    probe = Probe(sync_redis, bus.keys)
    jobs = [ids.mint("JOB") for _ in range(50)]
    answers = await asyncio.gather(*(bus.enqueue(j, lane="L", payload=b"p") for j in jobs + jobs))
    assert answers.count(Admission.ADMITTED) == 50
    assert answers.count(Admission.DUPLICATE) == 50
    assert len(probe.check()) == 50


async def test_a_flushed_script_cache_is_loaded_again(bus, sync_redis):
    """After SCRIPT FLUSH (a restarted server) one enqueue and a batch are admitted, once each."""
    sync_redis.script_flush()
    assert await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"") is Admission.ADMITTED
    sync_redis.script_flush()
    batch = [NewJob(ids.mint("JOB"), "L", b"") for _ in range(3)]
    assert await bus.enqueue_many(batch) == [Admission.ADMITTED] * 3
    assert Probe(sync_redis, bus.keys).counters()["admitted"] == 4


@pytest.mark.parametrize("flavour", ["asyncio", "blocking"])
async def test_an_error_reply_in_a_batch_raises_and_the_connection_stays_in_step(
    redis_server, tag, sync_redis, flavour
):
    """A batch whose middle job's row key holds a foreign value raises ScriptError; the jobs around it
    were admitted, and the next call on the same bus is answered by its own reply."""
    jobs = [NewJob(ids.mint("JOB"), "L", b"p") for _ in range(3)]
    async with Bus.from_url(redis_server.url, tag=tag) as abus:
        sync_redis.set(abus.keys.job(jobs[1].job), b"not a row")
        with SyncBus.from_url(redis_server.url, tag=tag) as sbus:
            if flavour == "asyncio":
                with pytest.raises(ScriptError):
                    await abus.enqueue_many(jobs)
                answer = await abus.enqueue(jobs[0].job, lane="L", payload=b"p")
            else:
                with pytest.raises(ScriptError):
                    sbus.enqueue_many(jobs)
                answer = sbus.enqueue(jobs[0].job, lane="L", payload=b"p")
        assert answer is Admission.DUPLICATE
        assert (await abus.inspect(jobs[2].job)).state.value == "queued"


async def test_buses_on_one_client_share_one_wire(redis_server, tag):
    """Two buses on one client send on one wire; closing the bus that closes the client closes it."""
    client = redis.asyncio.Redis.from_url(redis_server.url)
    first, second = Bus(client, tag=tag), Bus(client, tag=tag)
    assert first.wire is second.wire is not None
    assert await second.enqueue(ids.mint("JOB"), lane="L", payload=b"") is Admission.ADMITTED
    await first.aclose()


async def test_a_cancelled_enqueue_is_answered_truthfully_when_sent_again(server):
    """An enqueue cancelled while the server is paused (its command sent, its reply not read) leaves the
    bus usable: sent again once Redis resumed, it answers DUPLICATE (the first run admitted it)."""
    client = redis.asyncio.Redis(
        host="127.0.0.1", port=server.port, socket_timeout=5, retry=Retry(NoBackoff(), 0)
    )
    async with Bus(client, tag="cancel") as bus:
        for name in KEY_COUNTS:
            await client.script_load(source(name))
        assert await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"") is Admission.ADMITTED  # connected
        job = ids.mint("JOB")
        pause(server, seconds=None)
        try:
            call = asyncio.ensure_future(bus.enqueue(job, lane="L", payload=b"p"))
            await asyncio.sleep(0.3)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
        finally:
            signal_server(server, signal.SIGCONT)
        assert await bus.enqueue(job, lane="L", payload=b"p") is Admission.DUPLICATE
        assert (await bus.stats()).counters["admitted"] == 2


async def test_a_connection_the_server_closed_while_idle_is_made_anew(fresh_server):
    """The server closes the bus's idle connections (CLIENT KILL, as an idle timeout or a restart would):
    the next enqueue and batch on a client without retries are admitted, not refused."""
    async with Bus.from_url(fresh_server.url, tag="idle") as bus:
        assert await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"") is Admission.ADMITTED
        killer = redis.Redis.from_url(fresh_server.url)
        try:
            assert killer.client_kill_filter(_type="normal", skipme=True) >= 1
        finally:
            killer.close()
        await asyncio.sleep(0.2)  # the loop reads the server's close
        assert await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"") is Admission.ADMITTED
        assert await bus.enqueue_many([NewJob(ids.mint("JOB"), "L", b"")]) == [Admission.ADMITTED]
