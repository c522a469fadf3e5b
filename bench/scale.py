"""Scale with the work: the ring must cost the same with 10, 1,000 or 100,000 lanes.

For each lane count, on a redis-server of its own (AOF on, appendfsync everysec, as bench.queue's):

* **drain**: the same number of jobs spread over that many lanes, drained by one ``echomq worker``
  process (no-op handler), timed from the first claim to the last finish on the server clock (the rows);
* **enqueue → finished p99** under a steady **open-loop** enqueue at a fixed rate (each enqueue sent on
  its schedule, not after the previous reply, so queueing shows), job k in lane k mod L, one worker
  process; each job's latency is its row's finish time minus its admission time (both server clock,
  read through :meth:`echomq.Bus.inspect`). With more lanes than jobs in flight the ring holds the lanes
  in flight, each new lane entering and leaving it: the churn is what costs.

Every figure is a ratio to the 10-lane figure of the same run (target: ≥ 0.9 for drain, ≤ 1.1 for the
p99). :func:`bench_part` is the part of ``make bench``; ``python -m bench.scale`` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import redis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import Redis as AsyncRedis

from bench.processes import stop
from bench.queue import drain, worker_process
from bench.report import Figure, Part, percentile, table
from echomq import Bus, ids
from echomq.keyspace import Keyspace
from echomq.testing.server import RedisProcess

LANES = (10, 1_000, 100_000)
JOBS = 100_000
RATE = 500.0  # jobs/s of the open-loop enqueue: well under one worker's drain rate on a 2-core machine
SECONDS = 10.0
CONCURRENCY = 200
OPEN_LOOP_CONNECTIONS = 64
DRAIN_TARGET = 0.9  # of the 10-lane drain rate
P99_TARGET = 1.1  # of the 10-lane p99


def completed(client: redis.Redis, keys: Keyspace) -> int:
    """The bus's ``completed`` counter (the stats hash; Bus.stats sums every lane, O(lanes))."""
    return int(client.hget(keys.stats, "completed") or 0)


def _wait_completed(client: redis.Redis, keys: Keyspace, count: int, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while completed(client, keys) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} jobs were not finished in {timeout_s:.0f} s")
        time.sleep(0.02)


async def _open_loop(bus: Bus, lanes: int, rate: float, seconds: float) -> tuple[list[str], dict[str, float]]:
    """Enqueue ``rate * seconds`` jobs on a fixed schedule (job k at start + k / rate), each in its own
    task, so a slow reply delays no later send; returns the job ids and how the sending went (the rate
    achieved, the most sends in flight: a machine that falls behind offers less than ``rate``)."""
    count = max(1, round(rate * seconds))
    made: list[str] = []
    sends = []
    in_flight = most = 0

    async def send(k: int, job: str) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await bus.enqueue(job, lane=f"l{k % lanes}", payload=b"x" * 32)
        finally:
            in_flight -= 1

    start = time.perf_counter()
    for k in range(count):
        delay = start + k / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        # Minted at its send: a job's admission time is its id's mint time (the row keeps no other).
        made.append(ids.mint("JOB"))
        sends.append(asyncio.create_task(send(k, made[-1])))
    await asyncio.gather(*sends)
    achieved = count / max(1e-9, time.perf_counter() - start)
    return made, {"offered_per_s": rate, "achieved_per_s": achieved, "most_in_flight": most}


async def _latencies_ms(bus: Bus, made: list[str]) -> list[float]:
    gate = asyncio.Semaphore(32)

    async def one(job: str) -> float:
        async with gate:
            info = await bus.inspect(job)
        assert info.created_ms is not None
        assert info.finished_ms is not None
        return float(info.finished_ms - info.created_ms)

    return list(await asyncio.gather(*(one(job) for job in made)))


def latency(
    url: str, tag: str, lanes: int, rate: float, seconds: float
) -> tuple[list[float], dict[str, float]]:
    """Enqueue → finished latencies (ms, server clock) of an open-loop stream at ``rate`` over ``lanes``,
    and how the sending went."""
    client = redis.Redis.from_url(url)
    keys = Keyspace(tag)
    proc = worker_process(url, tag, "noop", CONCURRENCY)

    async def run() -> tuple[list[float], dict[str, float]]:
        # Sends in flight share a pool that waits for a free connection (redis-py's default pool fails a
        # call past its size at once, and opening a connection per send snowballs on a busy machine);
        # the latency is read from the rows (admission to finish), so a wait for a connection is not in
        # it, and the rate achieved is kept with the figures.
        pool = BlockingConnectionPool.from_url(url, max_connections=OPEN_LOOP_CONNECTIONS, timeout=None)
        async with Bus(AsyncRedis(connection_pool=pool), tag=tag) as bus:
            await bus.enqueue(ids.mint("JOB"), lane="warm", payload=b"")  # the worker is up and blocking
            await asyncio.to_thread(_wait_completed, client, keys, 1)
            made, sending = await _open_loop(bus, lanes, rate, seconds)
            await asyncio.to_thread(_wait_completed, client, keys, 1 + len(made))
            return await _latencies_ms(bus, made), sending

    try:
        return asyncio.run(run())
    finally:
        stop([proc])
        client.close()


def measure(
    *, jobs: int = JOBS, lanes: tuple[int, ...] = LANES, rate: float = RATE, seconds: float = SECONDS
) -> Part:
    """Drain and open-loop p99 for each lane count (each on a fresh server), as ratios to the first."""
    drains: dict[int, float] = {}
    p50s: dict[int, float] = {}
    p99s: dict[int, float] = {}
    sendings: dict[int, dict[str, float]] = {}
    for count in lanes:
        with RedisProcess(appendonly=True, appendfsync="everysec") as server:
            drains[count] = drain(server.url, f"scale-d{count}", jobs, 1, CONCURRENCY, lanes=min(count, jobs))
            times, sendings[count] = latency(server.url, f"scale-l{count}", count, rate, seconds)
            p50s[count], p99s[count] = statistics.median(times), percentile(times, 99)
    base = lanes[0]
    figures = []
    for count in lanes:
        ref = None if count == base else drains[base]
        figures.append(
            Figure(
                f"scale: drain, {jobs:,} jobs over {count:,} lanes",
                drains[count],
                "jobs/s",
                ref,
                f"{base:,} lanes" if ref else "",
                DRAIN_TARGET if ref else None,
            )
        )
    for count in lanes:
        ref = None if count == base else p99s[base]
        figures.append(
            Figure(
                f"scale: enqueue → finished p99, {rate:g}/s open loop over {count:,} lanes",
                p99s[count],
                "ms",
                ref,
                f"{base:,} lanes" if ref else "",
                P99_TARGET if ref else None,
                better="lower",
            )
        )
    info = {
        "jobs": jobs,
        "lanes": list(lanes),
        "rate": rate,
        "seconds": seconds,
        "p50_ms": p50s,
        "sending": sendings,
    }
    return Part(figures, info=info)


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument(
        "--scale-jobs", type=int, default=5_000 if quick else JOBS, help="drained, per lane count"
    )
    default = "10,1000,5000" if quick else ",".join(str(n) for n in LANES)
    parser.add_argument("--scale-lanes", default=default, help="lane counts, the first is the base")
    parser.add_argument("--scale-rate", type=float, default=RATE, help="open-loop enqueues per second")
    parser.add_argument("--scale-seconds", type=float, default=3.0 if quick else SECONDS)


def bench_part(args: argparse.Namespace) -> Part:
    lanes = tuple(int(n) for n in args.scale_lanes.split(","))
    return measure(jobs=args.scale_jobs, lanes=lanes, rate=args.scale_rate, seconds=args.scale_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    add_arguments(parser, quick="--quick" in sys.argv)
    print(table(bench_part(parser.parse_args()).figures))


if __name__ == "__main__":
    main()
