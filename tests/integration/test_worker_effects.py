"""A worker's handler returns its effects (echomq.Effects, echomq.Completion): they apply with the job's
completion, batched with the other completes of the turn, each job's once."""

from __future__ import annotations

import asyncio

from echomq import Bus, Completion, Effects, Finish, Job, PartitionedBus, Worker, ids
from echomq.jobs import Claim
from echomq.worker.completions import Completions
from tests.support.workers import eventually, running


def key(bus: Bus, name: str) -> str:
    return f"app:{{{bus.tag}}}:{name}"


async def _enqueue(bus, count: int, lanes: int = 5) -> list[str]:
    jobs = [ids.mint("JOB") for _ in range(count)]
    for i, job in enumerate(jobs):
        await bus.enqueue(job, lane=f"L{i % lanes}", payload=str(i).encode(), max_attempts=3)
    return jobs


async def test_a_batch_mixes_completes_with_and_without_effects(bus, sync_redis):
    """One batch of the Completions holds plain completes and completes with effects: each is answered
    its own outcome (a stale one applies nothing), and the effects apply once."""
    await _enqueue(bus, 4)
    plain, with_fx, again, stale = await bus.claim(count=4)
    assert await bus.complete(again, effects=Effects().incrby(key(bus, "n"), 1)) is Finish.DONE
    wrong = Claim(stale.job, stale.lane, stale.token + 1, request=stale.request)
    completions = Completions(bus)
    outcomes = await asyncio.gather(
        completions.complete(plain, b"p"),
        completions.complete(with_fx, b"f", Effects().incrby(key(bus, "n"), 10)),
        completions.complete(again, b"", Effects().incrby(key(bus, "n"), 1)),  # a retry: nothing again
        completions.complete(wrong, b"", Effects().incrby(key(bus, "n"), 100)),
    )
    assert outcomes == [Finish.DONE, Finish.DONE, Finish.DONE, Finish.STALE]
    assert sync_redis.get(key(bus, "n")) == b"11"
    assert (await bus.inspect(with_fx.job)).result == b"f"


async def test_a_batch_loads_the_effects_script_on_a_server_without_it(bus, sync_redis):
    """After SCRIPT FLUSH, the completes with effects of a batch still land, once each."""
    await _enqueue(bus, 3)
    claims = await bus.claim(count=3)
    sync_redis.script_flush()
    completions = Completions(bus)
    fx = Effects().sadd(key(bus, "s"), "x").incrby(key(bus, "n"), 1)
    outcomes = await asyncio.gather(*(completions.complete(claim, b"", fx) for claim in claims))
    assert outcomes == [Finish.DONE] * 3
    assert sync_redis.get(key(bus, "n")) == b"3"


async def test_handlers_return_effects_and_each_jobs_apply_once(bus, sync_redis):
    """Async and thread handlers returning Effects, a Completion or plain bytes, many at once: every job
    is done, with its result, and the shared counter moved once per job that returned effects."""
    count = 60

    async def async_handler(job: Job) -> Effects | Completion | bytes:
        n = int(job.payload)
        if n % 3 == 0:
            return b"plain"
        if n % 3 == 1:
            return Effects().incrby(key(bus, "n"), 1).sadd(key(bus, "seen"), job.id)
        return Completion(b"with", Effects().incrby(key(bus, "n"), 1).sadd(key(bus, "seen"), job.id))

    def thread_handler(job: Job) -> Completion:
        return Completion(job.payload, Effects().hincrby(key(bus, "t"), job.lane, 1))

    jobs = await _enqueue(bus, count)
    async with running(Worker(bus, async_handler, concurrency=16)) as worker:
        await eventually(lambda: worker.counts.completed == count, 30, "every job completed")
    with_effects = [job for i, job in enumerate(jobs) if i % 3]
    assert sync_redis.get(key(bus, "n")) == str(len(with_effects)).encode()
    assert sync_redis.smembers(key(bus, "seen")) == {job.encode() for job in with_effects}
    results = {i % 3: (await bus.inspect(job)).result for i, job in enumerate(jobs)}
    assert results == {0: b"plain", 1: b"", 2: b"with"}

    jobs = await _enqueue(bus, 20, lanes=4)
    async with running(Worker(bus, thread_handler, concurrency=4)) as worker:
        await eventually(lambda: worker.counts.completed == 20, 30, "every job completed")
    assert sync_redis.hgetall(key(bus, "t")) == {f"L{i}".encode(): b"5" for i in range(4)}


async def test_effects_that_cannot_apply_fail_the_try_and_the_retry_applies_its_own(bus, sync_redis):
    """A first try whose effects cannot apply (a key of another type) fails, nothing of it written; the
    retry's effects apply and complete the job."""
    sync_redis.set(key(bus, "wrong"), "a string")

    async def handler(job: Job) -> Effects:
        target = "wrong" if job.attempt == 1 else "right"
        return Effects().rpush(key(bus, "log"), job.attempt).hset(key(bus, target), "f", "v")

    [job] = await _enqueue(bus, 1)
    worker = Worker(bus, handler, concurrency=1)
    async with running(worker):
        await eventually(lambda: worker.counts.completed == 1, 30, "the retry completed")
    info = await bus.inspect(job)
    assert (info.state.value, info.attempts) == ("done", 2)
    assert sync_redis.lrange(key(bus, "log"), 0, -1) == [b"2"]
    assert sync_redis.get(key(bus, "wrong")) == b"a string"
    assert worker.counts.failed == 1


async def test_a_completion_with_a_bad_result_is_dead_lettered_with_nothing_applied(bus, sync_redis):
    """A Completion whose result is not bytes can never be stored: the job is dead-lettered at once,
    with the reason, and its effects are not applied."""

    async def handler(job: Job) -> Completion:
        return Completion("text", Effects().incrby(key(bus, "n"), 1))  # type: ignore[arg-type]

    [job] = await _enqueue(bus, 1)
    async with running(Worker(bus, handler, concurrency=1)) as worker:
        await eventually(lambda: worker.counts.dead == 1, 30, "the job was dead-lettered")
    info = await bus.inspect(job)
    assert info.state.value == "dead"
    assert "bytes" in (info.error or "")
    assert sync_redis.exists(key(bus, "n")) == 0


async def test_a_partitioned_worker_applies_each_partitions_effects(redis_server, tag, sync_redis):
    """On a PartitionedBus every complete with effects goes to its lane's partition and applies once."""
    bus = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3)
    try:

        async def handler(job: Job) -> Effects:
            return Effects().incrby(f"app:{tag}:n", 1).sadd(f"app:{tag}:lanes", job.lane)

        await _enqueue(bus, 30, lanes=6)
        async with running(Worker(bus, handler, concurrency=8)) as worker:
            await eventually(lambda: worker.counts.completed == 30, 30, "every job completed")
        assert sync_redis.get(f"app:{tag}:n") == b"30"
        assert len(sync_redis.smembers(f"app:{tag}:lanes")) == 6
    finally:
        await bus.aclose()
