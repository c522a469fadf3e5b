"""echomq.worker.completions on a real Redis: the batched completes' wire, outcomes, unknown scripts, lost
replies; and the worker's claim sizing, which keeps the batches whole."""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis
from redis.asyncio.connection import Connection

from echomq import Bus, Finish, Worker, finish, ids
from echomq.errors import RedisUnavailable, UnknownJob
from echomq.jobs import Claim
from echomq.testing.server import RedisProcess
from echomq.worker.completions import Completions
from tests.support.workers import eventually, running

# A script that holds the server for 0.6 s (run from another connection while a batch is sent).
_BUSY = """
local function ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local stop = ms() + 600
while ms() < stop do end
"""


async def _claims(bus: Bus, count: int) -> list[Claim]:
    for i in range(count):
        await bus.enqueue(ids.mint("JOB"), lane=f"L{i}", payload=b"p")
    return await bus.claim(count=count)


async def test_wire_is_what_redis_py_would_send(bus):
    """Each complete is written exactly as redis-py packs the same EVALSHA of complete.lua."""
    [claim] = await _claims(bus, 1)
    keys, args = finish.complete_call(bus, claim, b"result \x00\xff")
    sha = bus.scripts.get("complete", keys).sha
    packed = b"".join(Connection().pack_command("EVALSHA", sha, len(keys), *keys, *args))
    assert Completions(bus)._wire(claim, b"result \x00\xff") == packed


async def test_one_batch_answers_each_complete_its_own_outcome(bus, sync_redis):
    """Completes sent in one batch: a live claim is DONE, a stale token is STALE, a retry of a finished
    claim is DONE again, a job with no row raises UnknownJob; none disturbs another."""
    live, retried, stale = await _claims(bus, 3)
    assert await bus.complete(retried) is Finish.DONE
    gone = Claim(ids.mint("JOB"), "L9", 1, request=live.request)
    wrong = Claim(stale.job, stale.lane, stale.token + 1, request=stale.request)
    completions = Completions(bus)
    outcomes = await asyncio.gather(
        completions.complete(live, b"r"),
        completions.complete(retried, b""),
        completions.complete(wrong, b""),
        completions.complete(gone, b""),
        return_exceptions=True,
    )
    assert outcomes[:3] == [Finish.DONE, Finish.DONE, Finish.STALE]
    assert isinstance(outcomes[3], UnknownJob)
    assert (await bus.inspect(live.job)).result == b"r"
    assert int(sync_redis.hget(bus.keys.stats, "completed")) == 2
    assert completions.waiting == 0


async def test_a_server_without_the_script_loads_it_and_completes(bus, sync_redis):
    """After SCRIPT FLUSH (a restarted server), every complete of the batch still lands, once."""
    claims = await _claims(bus, 3)
    sync_redis.script_flush()
    completions = Completions(bus)
    outcomes = await asyncio.gather(*(completions.complete(claim, b"") for claim in claims))
    assert outcomes == [Finish.DONE] * 3
    assert int(sync_redis.hget(bus.keys.stats, "completed")) == 3


async def test_a_lost_batch_reply_is_retried_to_done_once(redis_server: RedisProcess, tag, sync_redis):
    """A batch whose replies time out (the server busy past the socket timeout) fails each caller with
    RedisUnavailable; the retry answers DONE and each job is completed once."""
    slow = Bus(redis.asyncio.Redis.from_url(redis_server.url, socket_timeout=0.2), tag)
    try:
        claims = await _claims(slow, 3)
        completions = Completions(slow)
        busy = threading.Thread(target=sync_redis.eval, args=(_BUSY, 0))
        busy.start()
        await asyncio.sleep(0.05)
        lost = await asyncio.gather(*(completions.complete(c, b"") for c in claims), return_exceptions=True)
        busy.join()
        assert all(isinstance(outcome, RedisUnavailable) for outcome in lost)
        again = await asyncio.gather(*(completions.complete(c, b"") for c in claims))
        assert again == [Finish.DONE] * 3
        assert int(sync_redis.hget(slow.keys.stats, "completed")) == 3
        assert {(await slow.inspect(c.job)).state.value for c in claims} == {"done"}
    finally:
        await slow.aclose()


async def test_bad_result_is_refused_before_anything_is_sent(bus):
    """A result over the payload limit raises at once; the job stays active."""
    [claim] = await _claims(bus, 1)
    with pytest.raises(Exception, match="over the limit"):
        await Completions(bus).complete(claim, b"x" * (bus.settings.max_payload + 1))
    assert (await bus.inspect(claim.job)).state.value == "active"


async def test_a_busy_worker_claims_half_its_slots_or_more(bus, sync_redis):
    """Draining a deep queue, the worker claims only when half its slots are free or no complete is on
    its way: never a claim per slot as each frees (which would fragment its batches for good)."""
    concurrency, count = 40, 400
    for i in range(count):
        await bus.enqueue(ids.mint("JOB"), lane=f"L{i % 7}", payload=b"")
    asked: list[int] = []
    claim_batch = bus.claim_batch

    async def counted(count: int = 1, **options):  # type: ignore[no-untyped-def]
        asked.append(count)
        return await claim_batch(count=count, **options)

    bus.claim_batch = counted  # type: ignore[method-assign]

    async def noop(job):
        return None

    async with running(Worker(bus, noop, concurrency=concurrency)):
        await eventually(lambda: int(sync_redis.hget(bus.keys.stats, "completed") or 0) == count)
    assert asked
    assert min(asked) >= concurrency // 2
