"""Lost replies, for real: a redis-server is SIGSTOPped for longer than the client's socket timeout while
a call is in flight, then SIGCONTed. The call ran when Redis resumed, but its reply went to a connection
the client had given up on; redis-py (or the worker) retried it. Each retry must be harmless and its
answer truthful: a claim's jobs reach a handler under the try that claim spent, a finish is told what
the first try did, and nothing is dead-lettered without a handler having run it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from echomq import Admission, Bus, Failure, Finish, Job, NewJob, RedisUnavailable, Release, Worker, ids
from echomq.scripts import KEY_COUNTS, source
from echomq.testing.proxy import Proxy
from echomq.testing.server import RedisProcess
from tests.support.pausing import (
    pause,
    signal_server,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)
from tests.support.workers import eventually, running

SOCKET_TIMEOUT_S = 0.5  # the clients' socket timeout; every pause below outlasts it
PAUSE_S = 2.0


@contextlib.asynccontextmanager
async def bus_on(server: RedisProcess, *, retries: int | None = None) -> AsyncIterator[Bus]:
    """A Bus whose client gives up on a reply after SOCKET_TIMEOUT_S; redis-py's default Retry of a
    ``Redis(host=...)`` client (10 retries) unless ``retries`` is given (0: the caller sees
    RedisUnavailable, as with a ``from_url`` client)."""
    options: dict[str, Any] = {"socket_timeout": SOCKET_TIMEOUT_S}
    if retries is not None:
        options["retry"] = Retry(NoBackoff(), retries)
    client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, **options)
    async with Bus(client, tag=f"lost{os.getpid()}") as bus:
        for name in KEY_COUNTS:  # loaded: a first EVALSHA in flight would only run into NOSCRIPT
            await bus.redis.script_load(source(name))
        # Pooled connections open before the pause: a command that has to connect during it fails in
        # the handshake, before it is sent, and so would lose nothing.
        await asyncio.gather(*(bus.redis.ping() for _ in range(8)))
        yield bus


def counters(server: RedisProcess, bus: Bus) -> dict[str, int]:
    client = redis.Redis.from_url(server.url)
    try:
        raw: dict[bytes, bytes] = client.hgetall(bus.keys.stats)  # type: ignore[assignment]
    finally:
        client.close()
    return {k.decode(): int(v) for k, v in raw.items()}


async def _one_job(bus: Bus, max_attempts: int = 1) -> str:
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p", max_attempts=max_attempts)
    return job


async def test_a_claim_whose_reply_is_lost_in_a_pause_hands_its_job_to_the_retry(server):
    """A claim in flight across a pause: redis-py's retry gets the job the first run claimed, same token,
    one try spent, and completing it is DONE; nothing is left active or dead."""
    async with bus_on(server) as bus:
        job = await _one_job(bus)
        pause(server, PAUSE_S)
        claims = await bus.claim(lease_ms=30_000)
        assert [(c.job, c.token, c.tries) for c in claims] == [(job, 1, 1)]
        seen = counters(server, bus)
        assert (seen.get("claimed"), seen.get("replayed", 0) >= 1) == (1, True)  # the reply was lost
        assert await bus.complete(claims[0], b"ok") is Finish.DONE
        info = await bus.inspect(job)
        assert (info.state.value, info.tries, info.attempts) == ("done", 1, 1)
        assert await bus.dead_jobs() == []


async def test_a_complete_whose_reply_is_lost_in_a_pause_answers_done(server):
    """A complete in flight across a pause: its retry answers DONE (that claim finished the job), and
    the job was completed once, with no stale refusal counted."""
    async with bus_on(server) as bus:
        job = await _one_job(bus)
        [claim] = await bus.claim()
        pause(server, PAUSE_S)
        assert await bus.complete(claim, b"result") is Finish.DONE
        seen = counters(server, bus)
        assert (seen.get("completed"), seen.get("stale", 0)) == (1, 0)
        assert (await bus.inspect(job)).result == b"result"


@pytest.mark.parametrize(
    ("retryable", "expected", "state"),
    [(True, Failure.RETRYING, "queued"), (False, Failure.DEAD, "dead")],
)
async def test_a_fail_whose_reply_is_lost_in_a_pause_answers_what_it_did(server, retryable, expected, state):
    """A fail in flight across a pause: its retry answers RETRYING (or DEAD), not STALE, and the failure
    was recorded once."""
    async with bus_on(server) as bus:
        job = await _one_job(bus, max_attempts=3)
        [claim] = await bus.claim()
        pause(server, PAUSE_S)
        assert await bus.fail(claim, "boom", retryable=retryable, delay_ms=0) is expected
        seen = counters(server, bus)
        assert (seen.get("retried", 0) + seen.get("dead", 0), seen.get("stale", 0)) == (1, 0)
        assert (await bus.inspect(job)).state.value == state


async def test_a_release_whose_reply_is_lost_in_a_pause_answers_released(server):
    """A release in flight across a pause: its retry answers RELEASED, the try is given back once."""
    async with bus_on(server) as bus:
        job = await _one_job(bus, max_attempts=3)
        [claim] = await bus.claim()
        pause(server, PAUSE_S)
        assert await bus.release(claim) is Release.RELEASED
        seen = counters(server, bus)
        assert (seen.get("released"), seen.get("stale", 0)) == (1, 0)
        info = await bus.inspect(job)
        assert (info.state.value, info.tries) == ("queued", 0)


class PausingBus(Bus):
    """A bus that, once armed, SIGSTOPs its server just before the first claim with a job to claim is
    sent (the test's way to have a real claim in flight across a real pause; Redis is untouched)."""

    def __init__(self, bus: Bus, server: RedisProcess, seconds: float | None) -> None:
        super().__init__(bus.redis, bus.tag, bus.settings)
        self.server = server
        self.seconds = seconds
        self.armed = False
        self.fired = False

    async def claim_batch(self, *args: Any, **kwargs: Any) -> Any:
        if self.armed and not self.fired:
            client = redis.Redis(port=self.server.port)
            try:
                ready = client.llen(self.keys.ring) > 0
            finally:
                client.close()
            if ready:
                self.fired = True
                pause(self.server, self.seconds)
        return await super().claim_batch(*args, **kwargs)


def _blocked(server: RedisProcess) -> bool:
    """True once a client (the idle worker's pickup) blocks in BLPOP on the server."""
    client = redis.Redis(port=server.port)
    try:
        return any(entry.get("cmd") == "blpop" for entry in client.client_list())
    finally:
        client.close()


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if getattr(record, "event", None) == event]


async def _done_or_dead(bus: Bus, job: str) -> bool:
    try:
        return (await bus.inspect(job)).state.value in ("done", "dead")
    except RedisUnavailable:  # the server is stopped right now
        return False


@pytest.mark.slow
@pytest.mark.parametrize("retries", [None, 0], ids=["redis-py-retries", "worker-retries"])
async def test_a_worker_whose_claim_reply_is_lost_runs_the_job_and_dead_letters_nothing(
    server, retries, caplog
):
    """A worker's claim in flight across a pause (retried by redis-py, or after RedisUnavailable by the
    worker with the same request id): the max_attempts=1 job runs in a handler and completes; it is
    never dead-lettered by its lease running out."""
    async with bus_on(server, retries=retries) as plain:
        bus = PausingBus(plain, server, PAUSE_S)
        with caplog.at_level(logging.DEBUG, logger="echomq"):
            (first, job), ran = await _one_job_through_a_worker(server, bus, sweep_every_s=0.5)
        info = await bus.inspect(job)
        assert (info.state.value, info.error, info.tries) == ("done", None, 1)
        assert bus.fired
        assert ran == [first, job]
        assert await bus.dead_jobs() == []
        assert counters(server, bus).get("replayed", 0) >= 1  # the lost claim's job, handed out again
        if retries == 0:
            assert _events(caplog, "worker.redis_error")  # the worker saw the claim fail, and retried it


async def _one_job_through_a_worker(
    server: RedisProcess, bus: PausingBus, *, sweep_every_s: float, delayed_ms: int = 0
) -> tuple[tuple[str, str], list[str]]:
    """A worker (one slot, 3 s leases) on ``bus`` busy with a first job; the bus armed, a max_attempts=1
    job enqueued behind it, the first released: the worker's next claim (a claim call of its own, not
    the one an idle worker sends behind its BLPOP) meets the bus's fault. Waits until the second job is
    done or dead: (the first job, the second job) and the ids handled, in order. With ``delayed_ms``, a job
    due that long after the start waits in delayed first (the worker learns its due time and sweeps then),
    and the first job is released just before that due time."""
    ran: list[str] = []
    gate = asyncio.Event()

    async def handler(job: Job) -> bytes:
        ran.append(job.id)
        if len(ran) == 1:
            await gate.wait()  # the slot stays busy until the second job waits in its lane
        return b"ran"

    worker = Worker(bus, handler, concurrency=1, lease_ms=3_000, sweep_every_s=sweep_every_s)
    async with running(worker):
        await eventually(lambda: _blocked(server), 10, "the idle worker blocked on its wake list")
        due_at = time.monotonic() + delayed_ms / 1000
        if delayed_ms:
            await bus.enqueue(ids.mint("JOB"), lane="D", payload=b"d", delay_ms=delayed_ms)
        first = await _one_job(bus)
        await eventually(lambda: ran == [first], 10, "the first job's handler started")
        bus.armed = True
        job = await _one_job(bus)
        if delayed_ms:  # the delayed job falls due just after the claim's fault, before its retry
            await asyncio.sleep(max(0.0, due_at - 0.1 - time.monotonic()))
        gate.set()  # the slot frees: the worker claims the second job, and the fault catches that claim
        await eventually(lambda: _done_or_dead(bus, job), 60, "the job finished")
    return (first, job), ran


class OutageBus(PausingBus):
    """A PausingBus whose next ``failures`` claims after the paused one fail before they are sent (Redis
    stays out of reach a while after it resumed: a cut, a failover)."""

    def __init__(self, bus: Bus, server: RedisProcess, seconds: float, failures: int) -> None:
        super().__init__(bus, server, seconds)
        self.failures = failures

    async def claim_batch(self, *args: Any, **kwargs: Any) -> Any:
        if self.fired and self.failures > 0:
            self.failures -= 1
            raise RedisUnavailable("out of reach (the test's outage)")
        return await super().claim_batch(*args, **kwargs)


@pytest.mark.slow
async def test_a_worker_asks_again_for_a_lost_claim_within_the_lease_however_long_redis_fails(server, caplog):
    """The claim's reply is lost in a pause and the next three tries fail too: the worker's usual
    backoff (0.5, 1, 2, 5 s) would ask again after the claim's record and the job's lease (3 s) ran
    out, and the max_attempts=1 job would die unrun. With a claim unanswered it asks again at least
    every quarter lease, gets the job, runs it and completes it."""
    async with bus_on(server, retries=0) as plain:
        bus = OutageBus(plain, server, 1.0, failures=3)
        with caplog.at_level(logging.DEBUG, logger="echomq"):
            (first, job), ran = await _one_job_through_a_worker(server, bus, sweep_every_s=60)
        assert (bus.fired, bus.failures) == (True, 0)
        assert len(_events(caplog, "worker.redis_error")) >= 4  # the lost claim and the three failures
        info = await bus.inspect(job)
        assert (info.state.value, info.tries) == ("done", 1)
        assert ran == [first, job]
        assert counters(server, bus).get("replayed", 0) >= 1


class SweepOutageBus(PausingBus):
    """A PausingBus whose sweeps fail for ``seconds_out`` after the pause began (the call a worker sends
    first runs into the outage: a sweep due at every try, as with a sweep period shorter than the pause
    between tries); claims are untouched."""

    def __init__(self, bus: Bus, server: RedisProcess, seconds: float, seconds_out: float) -> None:
        super().__init__(bus, server, seconds)
        self.seconds_out = seconds_out
        self.fired_at: float | None = None
        self.sweeps_failed = 0

    async def claim_batch(self, *args: Any, **kwargs: Any) -> Any:
        if self.armed and not self.fired:
            self.fired_at = time.monotonic()
        return await super().claim_batch(*args, **kwargs)

    async def sweep(self, *args: Any, **kwargs: Any) -> Any:
        if self.fired and self.fired_at is not None and time.monotonic() < self.fired_at + self.seconds_out:
            self.sweeps_failed += 1
            raise RedisUnavailable("out of reach (the test's outage)")
        return await super().sweep(*args, **kwargs)


@pytest.mark.slow
async def test_a_worker_asks_again_for_a_lost_claim_before_it_sweeps(server, caplog):
    """The claim's reply is lost in a pause, and every sweep fails for longer than the job's lease (3 s);
    a delayed job falls due during that outage, so a sweep is due at each try (a worker sweeps when a
    due time, a lease deadline or a trim comes, never on a bare period). The
    worker asks for the lost claim before it sweeps: it gets the job, runs it and completes it. Sweeping
    first, each failed sweep would keep the claim from being asked again, and the first sweep to land
    would find the lease run out and dead-letter the max_attempts=1 job unrun."""
    async with bus_on(server, retries=0) as plain:
        bus = SweepOutageBus(plain, server, 1.0, seconds_out=5.0)
        with caplog.at_level(logging.DEBUG, logger="echomq"):
            (first, job), ran = await _one_job_through_a_worker(
                server, bus, sweep_every_s=0.3, delayed_ms=1_500
            )
        assert bus.fired
        assert bus.sweeps_failed >= 1
        info = await bus.inspect(job)
        assert (info.state.value, info.tries, info.error) == ("done", 1, None)
        assert ran[:2] == [first, job]
        assert counters(server, bus).get("replayed", 0) >= 1


@pytest.mark.slow
async def test_a_worker_stopping_with_a_claim_unanswered_releases_its_jobs(server, caplog):
    """A worker stopped after its claim's reply was lost leaves no job active: the claim's job is back in
    its lane with the try not counted (released), never stranded for a lease."""
    release = asyncio.Event()
    ran: list[str] = []
    gate = asyncio.Event()

    async def handler(job: Job) -> bytes:
        ran.append(job.id)
        if len(ran) == 1:
            await gate.wait()  # a first job keeps the one slot busy, so the next claim is a call of its own
            return b"ran"
        await release.wait()  # if the worker's retry got the job first, shutdown releases it
        return b"ran"

    async with bus_on(server, retries=0) as plain:
        bus = PausingBus(plain, server, None)
        worker = Worker(bus, handler, concurrency=1, lease_ms=30_000, sweep_every_s=0.5, grace_s=0)
        with caplog.at_level(logging.DEBUG, logger="echomq"):
            task = asyncio.create_task(worker.run())
            try:
                await eventually(lambda: _blocked(server), 10, "the idle worker blocked on its wake list")
                first = await _one_job(bus)
                await eventually(lambda: ran == [first], 10, "the first job's handler started")
                bus.armed = True
                job = await _one_job(bus)
                gate.set()
                await eventually(lambda: _events(caplog, "worker.redis_error"), 10, "the claim failed")
                signal_server(server, signal.SIGCONT)
                await eventually(lambda: counters(server, bus).get("claimed") == 2, 10, "the claim ran")
            finally:
                worker.stop()
                await asyncio.wait_for(task, 30)
                release.set()
        assert bus.fired
        info = await bus.inspect(job)
        assert (info.state.value, info.tries, info.attempts) == ("queued", 0, 1)
        assert counters(server, bus).get("released") == 1


async def test_a_batch_enqueue_cut_off_by_a_pause_gives_its_connection_back(server):
    """A pipelined batch of scripts that times out before it is sent (redis-py checks the scripts exist
    first) hands its pooled connection back: on a pool of one connection the bus still talks once Redis
    resumes, and re-sending the batch admits each job once."""
    client = redis.asyncio.Redis(
        host="127.0.0.1",
        port=server.port,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
        max_connections=1,
    )
    async with Bus(client, tag=f"pool{os.getpid()}") as bus:
        batch = [NewJob(ids.mint("JOB"), "L", b"p") for _ in range(3)]
        assert await bus.redis.ping()
        pause(server, seconds=None)
        with pytest.raises(RedisUnavailable):
            await bus.enqueue_many(batch)
        signal_server(server, signal.SIGCONT)
        admissions = await bus.enqueue_many(batch)  # the pool's one connection is free again
        assert admissions == [Admission.ADMITTED] * 3
        assert [(await bus.inspect(job.job)).state.value for job in batch] == ["queued"] * 3


async def test_an_idle_workers_claim_sent_behind_its_blpop_with_its_reply_lost_runs_the_job_once(server):
    """An idle worker's claim waits in Redis behind its BLPOP and runs the moment a token arrives; here its
    reply is swallowed (a partition: the proxy forwards nothing), then the link is cut. The worker asks
    again with the same request id, is handed the job under the try that claim spent, and runs it once:
    the max_attempts=1 job is done, not dead-lettered by its lease running out."""
    ran: list[str] = []

    async def handler(job: Job) -> bytes:
        ran.append(job.id)
        return b"ran"

    tag = f"pickup{os.getpid()}"
    with Proxy(server.port) as proxy:
        async with Bus.from_url(proxy.url, tag=tag) as bus, Bus.from_url(server.url, tag=tag) as direct:
            worker = Worker(bus, handler, concurrency=1, lease_ms=3_000, sweep_every_s=0.5)
            async with running(worker):
                await eventually(lambda: _blocked(server), 10, "the idle worker blocked on its wake list")
                proxy.cut("blackhole")
                job = await _one_job(direct)  # its token wakes the BLPOP; the claim behind it runs
                await eventually(lambda: counters(server, direct).get("claimed") == 1, 10, "the claim ran")
                proxy.restore()  # the swallowed reply is gone; the held connections are closed
                await eventually(lambda: _done_or_dead(direct, job), 30, "the job finished")
            info = await direct.inspect(job)
    assert (info.state.value, info.tries, info.error) == ("done", 1, None)
    assert ran == [job]
    assert counters(server, direct).get("replayed", 0) >= 1
    assert await direct.dead_jobs() == []
