"""One logical queue over P partitions (echomq.partitions) on one real redis-server: each lane lives in
the partition its name hashes to, calls route by lane or merge across partitions, claims rotate across
partitions within the stated fairness bound, and a worker runs every job of every partition once."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import zlib

import pytest
import redis

from echomq import Admission, Failure, Finish, InvalidLane, InvalidOption, NewJob, UnknownJob, Worker, ids
from echomq.errors import InvalidTag
from echomq.partitions import PartitionedBus, partition_of, partition_tags
from echomq.testing.server import RedisProcess
from tests.support.workers import cli, eventually, run_cli, running, stop_process

P = 3


@pytest.fixture
async def pbus(redis_server, tag):
    the_bus = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=P)
    yield the_bus
    await the_bus.aclose()


def _lanes_of(partition: int, count: int, prefix: str = "PLR", partitions: int = P) -> list[str]:
    """``count`` lane names that hash to ``partition`` of ``partitions``."""
    names = (f"{prefix}{i}" for i in range(100_000))
    return [n for n in names if partition_of(n, partitions) == partition][:count]


def test_a_lanes_partition_is_a_stable_hash_of_its_name():
    """CRC-32 of the name modulo P: the same in every process, and every partition gets lanes."""
    assert partition_of("PLRalice", 3) == zlib.crc32(b"PLRalice") % 3
    spread = {partition_of(f"PLR{i}", 3) for i in range(30)}
    assert spread == {0, 1, 2}
    assert partition_tags("cm", 3) == ["cm.0", "cm.1", "cm.2"]


def test_bad_partition_counts_tags_and_lanes_are_refused():
    with pytest.raises(InvalidOption):
        partition_tags("cm", 0)
    with pytest.raises(InvalidTag):
        partition_tags("c{m", 2)
    with pytest.raises(InvalidLane):
        partition_of("bad lane", 3)


async def test_a_job_lives_in_its_lanes_partition(pbus, sync_redis):
    """Its row and its lane are keys of the lane's partition's tag, none of the others'."""
    lane = _lanes_of(2, 1)[0]
    job = ids.mint("JOB")
    assert await pbus.enqueue(job, lane=lane, payload=b"g") is Admission.ADMITTED
    assert await pbus.enqueue(job, lane=lane, payload=b"g") is Admission.DUPLICATE
    home = pbus.partitions[2].keys
    assert sync_redis.exists(home.job(job), home.lane(lane)) == 2
    for other in pbus.partitions[:2]:
        assert sync_redis.exists(other.keys.job(job), other.keys.lane(lane)) == 0
    assert (await pbus.inspect(job)).state.value == "queued"


async def test_a_batch_is_split_by_partition_and_answered_in_order(pbus):
    lanes = [lane for p in range(P) for lane in _lanes_of(p, 2)]
    batch = [NewJob(ids.mint("JOB"), lane, b"x") for lane in lanes]
    repeat = [batch[4], NewJob(ids.mint("JOB"), lanes[0], b"y"), batch[1]]
    assert await pbus.enqueue_many(batch) == [Admission.ADMITTED] * len(batch)
    assert await pbus.enqueue_many(repeat) == [Admission.DUPLICATE, Admission.ADMITTED, Admission.DUPLICATE]
    stats = await pbus.stats()
    assert stats.queued == len(batch) + 1
    assert stats.lanes_total == len(lanes)


async def test_finishing_calls_route_by_the_claims_lane(pbus):
    """complete, fail, extend and release each reach the claim's partition, fenced as on one bus."""
    lanes = [_lanes_of(p, 1)[0] for p in range(P)]
    await pbus.enqueue_many([NewJob(ids.mint("JOB"), lane, b"x", max_attempts=1) for lane in lanes])
    claims = await pbus.claim(count=3, lease_ms=10_000)
    assert sorted(c.lane for c in claims) == sorted(lanes)
    done, dead, back = claims
    assert (await pbus.extend(done, 20_000)).value == "extended"
    assert await pbus.complete(done, b"r") is Finish.DONE
    assert await pbus.complete(done, b"r") is Finish.DONE  # a retry of its own complete
    assert await pbus.fail(dead, "boom", retryable=False) is Failure.DEAD
    assert (await pbus.release(back)).value == "released"
    stats = await pbus.stats()
    assert (stats.done, stats.dead, stats.queued, stats.active) == (1, 1, 1, 0)
    assert [job for job, _ in await pbus.dead_jobs()] == [dead.job]
    assert await pbus.retry_dead(dead.job) is True
    assert await pbus.retry_dead(dead.job) is False
    assert (await pbus.stats()).queued == 2
    with pytest.raises(UnknownJob):
        await pbus.inspect(ids.mint("JOB"))


async def test_dead_letters_merge_across_partitions_oldest_first(pbus):
    lanes = [_lanes_of(p, 1)[0] for p in (2, 0, 1)]
    dead = []
    for lane in lanes:  # one death at a time, so their times are in this order
        await pbus.enqueue(ids.mint("JOB"), lane=lane, payload=b"x")
        [claim] = await pbus.claim(lease_ms=10_000)
        assert await pbus.fail(claim, "no", retryable=False) is Failure.DEAD
        dead.append(claim.job)
        await asyncio.sleep(0.003)
    assert [job for job, _ in await pbus.dead_jobs()] == dead
    assert [job for job, _ in await pbus.dead_jobs(limit=2)] == dead[:2]
    retried = await pbus.retry_all_dead()
    assert (retried.listed, sorted(retried.moved)) == (3, sorted(dead))


async def test_a_retried_claim_request_is_answered_with_the_same_jobs(pbus):
    """A claim whose reply was lost is asked again by its request id: every partition it reached answers
    with what it claimed, and nothing new is claimed."""
    lanes = [lane for p in range(P) for lane in _lanes_of(p, 2)]
    await pbus.enqueue_many([NewJob(ids.mint("JOB"), lane, b"x") for lane in lanes])
    first = await pbus.claim(count=4, lease_ms=10_000, request="lost-1")
    again = await pbus.claim(count=4, lease_ms=10_000, request="lost-1")
    assert [(c.job, c.token) for c in again] == [(c.job, c.token) for c in first]
    assert (await pbus.stats()).active == 4


async def test_claims_rotate_within_the_fairness_bound(pbus):
    """A lane that becomes non-empty behind W_p waiting lanes of its partition is served within
    P * (W_p + c) jobs claimed, c at a time, however deep the other lanes are."""
    waiting = {p: _lanes_of(p, 2 + 2 * p) for p in range(P)}  # 2, 4 and 6 deep lanes per partition
    await pbus.enqueue_many(
        [
            NewJob(ids.mint("JOB"), lane, b"x")
            for lanes in waiting.values()
            for lane in lanes
            for _ in range(30)
        ]
    )
    for count in (1, 2):
        for p in range(P):
            newcomer = _lanes_of(p, 1, prefix=f"NEW{count}x")[0]
            await pbus.enqueue(ids.mint("JOB"), lane=newcomer, payload=b"n")
            bound = P * (len(waiting[p]) + count)
            claimed = 0
            while True:
                batch = await pbus.claim(count=count, lease_ms=60_000)
                assert batch, "the queue ran dry before the newcomer was served"
                claimed += len(batch)
                if any(c.lane == newcomer for c in batch):
                    break
                assert claimed < bound, f"lane of partition {p} not served within {bound} claims"
            assert claimed <= bound


async def test_a_worker_runs_every_job_of_every_partition_once(pbus):
    """Jobs on lanes of every partition, enqueued before and while the worker idles (its blocks on the
    three wake lists), each run once and completed."""
    seen: list[str] = []

    async def handler(job):
        seen.append(job.id)

    lanes = [lane for p in range(P) for lane in _lanes_of(p, 3)]
    early = [NewJob(ids.mint("JOB"), lane, b"e") for lane in lanes]
    await pbus.enqueue_many(early)
    worker = Worker(pbus, handler, concurrency=4, lease_ms=5_000)
    async with running(worker):
        await eventually(lambda: len(seen) == len(early), what="the early jobs")
        late = []
        for p in (2, 0, 1):  # one at a time, onto an idle worker blocked on every partition
            job = NewJob(ids.mint("JOB"), _lanes_of(p, 1, prefix="LATE")[0], b"l")
            late.append(job)
            await pbus.enqueue_many([job])
            expected = len(early) + len(late)
            await eventually(lambda n=expected: len(seen) == n, what=f"a job of partition {p}")
    assert sorted(seen) == sorted(j.job for j in [*early, *late])
    stats = await pbus.stats()
    assert (stats.done, stats.queued, stats.active) == (len(seen), 0, 0)


async def test_a_token_popped_while_the_worker_is_busy_is_passed_on(pbus, sync_redis):
    """A busy worker's block still waiting on a partition gives a token it pops back to the wake list,
    so an idle worker wakes for the job (here: a second worker, blocked on that partition)."""
    release = asyncio.Event()
    ran: list[tuple[str, str]] = []

    def make(name):
        async def handler(job):
            ran.append((name, job.lane))
            if name == "busy":
                await release.wait()

        return handler

    busy = Worker(pbus, make("busy"), concurrency=1, lease_ms=60_000)  # no lease timer in the test
    async with running(busy):
        await asyncio.sleep(0.3)  # blocked on all three wake lists
        await pbus.enqueue(ids.mint("JOB"), lane=_lanes_of(0, 1)[0], payload=b"x")
        await eventually(lambda: len(ran) == 1, what="the busy worker takes the first job")
        # its blocks on partitions 1 and 2 still wait; a job there pops a token it cannot use
        idle = Worker(pbus, make("idle"), concurrency=1, lease_ms=60_000)
        async with running(idle):
            await asyncio.sleep(0.3)
            await pbus.enqueue(ids.mint("JOB"), lane=_lanes_of(1, 1)[0], payload=b"y")
            await eventually(lambda: len(ran) == 2, timeout=5, what="someone runs the second job")
            release.set()
    assert ran[1][0] == "idle"


async def test_the_command_line_runs_a_worker_and_reads_stats_on_a_partitioned_bus(pbus, redis_server):
    """``echomq --partitions P``: stats merged over the partitions, and a worker that drains all of them;
    a count outside 1..1024 is a usage error."""
    jobs = [NewJob(ids.mint("JOB"), f"PLRcli{i}", b"x") for i in range(12)]
    await pbus.enqueue_many(jobs)
    common = ("--tag", pbus.tag, "--partitions", str(P))
    out = run_cli(redis_server.url, *common, "stats", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["depth"]["queued"] == 12
    worker = cli(redis_server.url, *common, "worker", "tests.faults.handlers:noop")
    try:
        await eventually(lambda: _done(pbus, 12), 30, "the worker drained every partition")
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(15) == 0
        stop_process(worker)
    for bad in ("0", "1025", "three"):
        refused = run_cli(redis_server.url, "--tag", pbus.tag, "--partitions", bad, "stats")
        assert refused.returncode == 2
        assert "partition count" in refused.stderr


async def _done(pbus: PartitionedBus, count: int) -> bool:
    return (await pbus.stats()).done == count


async def test_a_refused_batch_admits_nothing_in_any_partition(pbus):
    """Every job of a batch is checked before any partition's share is sent: one bad job of partition 1
    and nothing is admitted in partition 0 either (found by the adversary pass: a partition's task ran
    on behind the other's error)."""
    good = NewJob(ids.mint("JOB"), _lanes_of(0, 1)[0], b"x")
    bad = NewJob(ids.mint("JOB"), _lanes_of(1, 1)[0], b"x", max_attempts=0)
    with pytest.raises(InvalidOption):
        await pbus.enqueue_many([good, bad])
    await asyncio.sleep(0.2)
    assert (await pbus.stats()).queued == 0


async def test_a_claim_request_too_long_for_the_last_partition_is_refused_before_any_claim(redis_server, tag):
    """Each partition's claim carries ``<request>.<p>`` (64 characters at most): a request that would
    overflow at partition 10 of 12 is refused before the first partition claims, nothing left active."""
    pbus = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=12)
    try:
        await pbus.enqueue_many([NewJob(ids.mint("JOB"), f"PLR{i}", b"x") for i in range(30)])
        with pytest.raises(InvalidOption):
            await pbus.claim_batch(count=30, lease_ms=60_000, request="r" * 62)
        assert (await pbus.stats()).active == 0
        assert len((await pbus.claim_batch(count=30, request="r" * 61)).jobs) == 30
    finally:
        await pbus.aclose()


async def test_a_job_id_is_deduplicated_within_its_lanes_partition(pbus):
    """As documented (echomq.partitions): the same id and lane again is DUPLICATE, another lane of the
    same partition CONFLICT, as on one bus; a lane of another partition is another bus, which admits it."""
    job = ids.mint("JOB")
    home, same, other = _lanes_of(0, 2)[0], _lanes_of(0, 2)[1], _lanes_of(1, 1)[0]
    assert await pbus.enqueue(job, lane=home, payload=b"1") is Admission.ADMITTED
    assert await pbus.enqueue(job, lane=home, payload=b"1") is Admission.DUPLICATE
    assert await pbus.enqueue(job, lane=same, payload=b"1") is Admission.CONFLICT
    assert await pbus.enqueue(job, lane=other, payload=b"1") is Admission.ADMITTED


async def test_a_job_enqueued_while_a_partitioned_worker_drains_wakes_an_idle_worker(redis_server, tag):
    """A job enqueued while a partitioned worker drains at stop wakes another, idle worker: the stopping
    worker's blocks are cancelled at once and a token they may have popped is pushed back (found by the
    adversary pass: the blocks ran on through the grace and swallowed the tokens)."""
    buses = [PartitionedBus.from_url(redis_server.url, tag=tag, partitions=2) for _ in range(2)]
    done: dict[str, tuple[str, float]] = {}

    def handler(name: str):
        async def handle(job):
            if job.payload == b"long":
                await asyncio.sleep(4)
            done[job.id] = (name, time.monotonic())

        return handle

    a = Worker(buses[0], handler("A"), concurrency=2, lease_ms=60_000, sweep_every_s=1, grace_s=10)
    b = Worker(buses[1], handler("B"), concurrency=1, lease_ms=60_000, sweep_every_s=1)
    run_a = asyncio.create_task(a.run())
    await asyncio.sleep(1.0)  # A blocks first on every partition's wake list (first in Redis's queue)
    run_b = asyncio.create_task(b.run())
    await asyncio.sleep(1.0)  # B idle, blocked behind A
    try:
        long = ids.mint("JOB")
        await buses[0].enqueue(long, lane=_lanes_of(0, 1, partitions=2)[0], payload=b"long")
        await asyncio.sleep(0.5)
        assert a.in_flight == 1  # A runs the long job; its block on partition 1 stays
        assert long not in done
        a.stop()  # graceful: A drains its long job for up to grace_s
        await asyncio.sleep(0.3)
        job, sent = ids.mint("JOB"), time.monotonic()
        await buses[0].enqueue(job, lane=_lanes_of(1, 1, partitions=2)[0], payload=b"x")
        for _ in range(60):
            if job in done:
                break
            await asyncio.sleep(0.05)
        assert job in done, "an idle worker did not wake for a job enqueued while another worker stopped"
        assert done[job][1] - sent < 3
    finally:
        a.stop()
        b.stop()
        await asyncio.gather(run_a, run_b)
        for bus in buses:
            await bus.aclose()


@pytest.mark.parametrize(("partitions", "max_connections"), [(200, None), (12, 4)])
async def test_merged_calls_work_with_more_partitions_than_the_pool_holds(
    redis_server, tag, partitions, max_connections
):
    """stats, sweep, dead letters and retry-all ask every partition, at most a quarter of the pool at a
    time (found by the adversary pass: all at once, every call failed past the pool's size)."""
    pbus = PartitionedBus.from_url(
        redis_server.url, tag=tag, partitions=partitions, max_connections=max_connections
    )
    try:
        await pbus.enqueue_many([NewJob(ids.mint("JOB"), f"PLR{i}", b"x") for i in range(30)])
        assert (await pbus.stats()).queued == 30
        assert (await pbus.sweep()).swept
        assert await pbus.dead_jobs() == []
        assert (await pbus.retry_all_dead()).listed == 0
    finally:
        await pbus.aclose()


async def test_a_bus_opened_with_another_partition_count_is_refused_before_anything_runs(redis_server, tag):
    """Each partition keeps its place i/P: a producer or a worker with another P is refused at once
    (found by the adversary pass: a P=4 worker on a P=3 bus claimed a job in one partition and finished
    it on another, refused, so the job ran max_attempts times and died)."""
    three = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3)
    four = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=4)
    runs: list[str] = []

    async def handler(job):
        runs.append(job.id)

    try:
        job = ids.mint("JOB")
        await three.enqueue(job, lane="PLRx", payload=b"x", max_attempts=3)
        with pytest.raises(InvalidOption, match="3 partitions"):
            await four.enqueue(ids.mint("JOB"), lane="PLRy", payload=b"y")
        with pytest.raises(InvalidOption):
            await Worker(four, handler, concurrency=2, lease_ms=500).run()
        assert runs == []
        assert (await three.inspect(job)).state.value == "queued"
        assert (await three.stats()).queued == 1
    finally:
        await three.aclose()
        await four.aclose()


async def test_a_worker_started_before_its_redis_checks_each_partition_before_claiming_from_it(tag):
    """The check at a worker's start may find Redis unreachable (CI caught one that died of it): the
    worker goes on, checks each partition's place before that partition's first claim, and still
    refuses a bus of another P there, before anything runs."""
    process = RedisProcess(appendonly=False)  # its port chosen, the server not started yet
    three = PartitionedBus.from_url(process.url, tag=tag, partitions=3)
    four = PartitionedBus.from_url(process.url, tag=tag, partitions=4)
    ran: list[str] = []

    async def handler(job):
        ran.append(job.id)

    try:
        wrong = asyncio.create_task(Worker(four, handler, concurrency=2, lease_ms=2_000).run())
        async with running(Worker(three, handler, concurrency=2, lease_ms=2_000)):
            await asyncio.sleep(0.3)  # both workers are past their start, Redis still down
            assert not wrong.done()
            await asyncio.to_thread(process.start)
            jobs = [ids.mint("JOB") for _ in range(6)]
            await three.enqueue_many([NewJob(job, f"PLR{i}", b"x") for i, job in enumerate(jobs)])
            await eventually(lambda: sorted(ran) == sorted(jobs), what="every job run once")
            with pytest.raises(InvalidOption, match="3 partitions"):
                await asyncio.wait_for(wrong, 30)
        with redis.Redis(port=process.port) as client:
            assert [client.get(f"emq:{{{t}}}:layout") for t in partition_tags(tag, 3)] == [
                f"{i}/3".encode() for i in range(3)
            ]
    finally:
        await three.aclose()
        await four.aclose()
        process.close()


async def test_a_retried_claim_answers_the_jobs_of_the_lost_one_and_claims_nothing_new(pbus):
    """A retry after a lost reply asks only the partitions holding its claim record: jobs that arrived
    since in a partition its first call found empty are not claimed by it (found by the adversary pass:
    the retry claimed them and never asked the partition that answered the lost call)."""
    request = next(f"r{i}" for i in range(1000) if zlib.crc32(f"r{i}".encode()) % P == 0)  # starts at 0
    await pbus.enqueue_many([NewJob(ids.mint("JOB"), lane, b"x") for lane in _lanes_of(1, 2)])
    lost = await pbus.claim_batch(count=2, lease_ms=60_000, request=request)  # its reply "lost"
    assert len(lost.jobs) == 2
    await pbus.enqueue_many([NewJob(ids.mint("JOB"), lane, b"x") for lane in _lanes_of(0, 2)])
    retry = await pbus.claim_batch(count=2, lease_ms=60_000, request=request)
    assert sorted(c.job for c in retry.jobs) == sorted(c.job for c in lost.jobs)
    assert (await pbus.stats()).active == 2
