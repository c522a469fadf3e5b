"""echomq.results: wait for a job's result without polling (await.lua and the signal of its end)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from echomq import (
    Bus,
    InvalidId,
    InvalidOption,
    JobDead,
    ResultExpired,
    ResultTimeout,
    Settings,
    SyncBus,
    UnknownJob,
    Worker,
    ids,
)
from echomq.testing.monitor import CommandMonitor
from tests.support.workers import running


async def test_a_waiter_gets_the_result_a_worker_completes_the_job_with(bus):
    """The result arrives once the worker completes the job, however long after the wait began."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"21")

    async def double(run):
        return str(int(run.payload) * 2).encode()

    waiting = asyncio.create_task(bus.result(job, timeout=30))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    async with running(Worker(bus, double, concurrency=1)):
        assert await waiting == b"42"


async def test_a_finished_job_answers_at_once_and_many_waiters_all_wake(bus):
    """Ten callers wait on one job: all get the result from one completion; a late caller reads it."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    waiters = [asyncio.create_task(bus.result(job, timeout=30)) for _ in range(10)]
    await asyncio.sleep(0.2)
    [claim] = await bus.claim()
    await bus.complete(claim, b"ok")
    assert await asyncio.gather(*waiters) == [b"ok"] * 10
    assert await bus.result(job, timeout=0) == b"ok"


async def test_a_dead_job_raises_job_dead_with_its_error(bus):
    """Failed for good, cancelled or revoked: the waiter gets JobDead with the row's error."""
    failed, cancelled, revoked = (ids.mint("JOB") for _ in range(3))
    for job in (failed, cancelled, revoked):
        await bus.enqueue(job, lane=job[-4:], payload=b"", max_attempts=2)
    waiters = {job: asyncio.create_task(bus.result(job, timeout=30)) for job in (failed, cancelled, revoked)}
    await asyncio.sleep(0.2)
    claims = {claim.job: claim for claim in await bus.claim(count=3)}
    await bus.fail(claims[failed], "boom", retryable=False)
    await bus.revoke(revoked, "enough")
    await bus.fail(claims[cancelled], "later", delay_ms=60_000)  # retrying: not an end
    await bus.cancel(cancelled, "no longer needed")
    errors = {}
    for job, task in waiters.items():
        with pytest.raises(JobDead) as caught:
            await task
        errors[job] = caught.value.error
    assert errors == {failed: "boom", cancelled: "cancelled: no longer needed", revoked: "revoked: enough"}


async def test_a_retry_is_not_an_end_the_waiter_keeps_waiting(bus):
    """A fail that sends the job back (a retry) wakes nobody; the completion of the retry does."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    waiting = asyncio.create_task(bus.result(job, timeout=30))
    await asyncio.sleep(0.2)
    [claim] = await bus.claim()
    await bus.fail(claim, "flaky", delay_ms=0)
    await asyncio.sleep(0.3)
    assert not waiting.done()
    [claim] = await bus.claim()
    await bus.complete(claim, b"second time")
    assert await waiting == b"second time"


async def test_timeout_raises_result_timeout_and_the_job_is_untouched(bus, probe):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    with pytest.raises(ResultTimeout):
        await bus.result(job, timeout=0.3)
    assert probe.lane("L") == [job]
    with pytest.raises(TimeoutError):  # ResultTimeout is a TimeoutError too
        await bus.result(job, timeout=0)


async def test_the_wait_sends_no_command_while_it_blocks(redis_server, tag):
    """Without polling: while the job runs, the waiter sends one look (the script) and one BLPOP per block,
    then a last look at its timeout; nothing else."""
    waiter = Bus.from_url(redis_server.url, tag=tag)
    try:
        job = ids.mint("JOB")
        await waiter.enqueue(job, lane="L", payload=b"")
        monitor = CommandMonitor(redis_server.port)
        await asyncio.sleep(0.2)
        with pytest.raises(ResultTimeout):
            await waiter.result(job, timeout=2.5)
        await asyncio.sleep(0.2)
        lines = monitor.close()
    finally:
        await waiter.aclose()
    names = [line.split('"')[1].upper() for line in lines if '"' in line]
    assert names.count("BLPOP") == 1, names
    assert names.count("EVALSHA") + names.count("EVAL") == 2, names


async def test_a_trimmed_result_is_expired_and_an_unknown_id_unknown(redis_server, tag):
    """Past the result ttl the row is a tombstone: the result is gone (ResultExpired, an UnknownJob)."""
    settings = Settings(result_ttl_ms=0, dedup_window_ms=60_000)
    async with Bus.from_url(redis_server.url, tag=tag, settings=settings) as short:
        job = ids.mint("JOB")
        await short.enqueue(job, lane="L", payload=b"")
        [claim] = await short.claim()
        await short.complete(claim, b"soon gone")
        await short.sweep()
        with pytest.raises(ResultExpired):
            await short.result(job, timeout=1)
        with pytest.raises(UnknownJob):
            await short.result(ids.mint("JOB"), timeout=1)


async def test_bad_input_is_refused(bus):
    for bad, error in ((None, InvalidId), ("JOBnope", InvalidId)):
        with pytest.raises(error):
            await bus.result(bad, timeout=1)
    for timeout in (-1, "1", True, 10**9):
        with pytest.raises(InvalidOption):
            await bus.result(ids.mint("JOB"), timeout=timeout)


def test_the_sync_bus_waits_for_a_result_in_a_thread(redis_server, tag):
    """SyncBus.result blocks its thread until the job ends."""
    with SyncBus.from_url(redis_server.url, tag=tag) as sync:
        job = ids.mint("JOB")
        sync.enqueue(job, lane="L", payload=b"")
        got = []
        thread = threading.Thread(target=lambda: got.append(sync.result(job, timeout=30)))
        thread.start()

        async def finish():
            async with Bus.from_url(redis_server.url, tag=tag) as bus:
                await asyncio.sleep(0.2)
                [claim] = await bus.claim()
                await bus.complete(claim, b"from a worker")

        asyncio.run(finish())
        thread.join(30)
        assert got == [b"from a worker"]
