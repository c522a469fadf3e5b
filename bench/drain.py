"""The drain benchmark: how fast worker processes finish pre-filled jobs of a no-op handler.

Run alone with ``.venv/bin/python -m bench.drain`` (it starts its own redis-server, AOF on, appendfsync
everysec, as :mod:`bench.queue` does) or call :func:`measure` with a server's URL. Every figure is
compared with the Redis limit measured in the same run: :func:`bench.queue.limit_drain`, claim.lua in
batches of 500 then complete.lua for each, pipelined, on one blocking client (no worker, no asyncio).

A drain pre-fills ``count`` jobs, starts ``echomq worker bench.handlers:noop`` processes and times
first claim to last finish from the rows' server times (``claimed_at``, ``finished``), so process
start-up is not counted. The worker's own CPU per job is read from ``/proc/<pid>/stat`` (user +
system, all its threads) between its first claim and its last finish: on a shared machine wall-clock
figures are noisy, the CPU per job is the steadier guide, and a regression shows in it first.

Figures are figures, never assertions: nothing here fails because a number is low.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import dataclass

import redis

from bench.processes import cpu_s, stop
from bench.queue import claim_span_ms, enqueue_batched, limit_drain, worker_process
from bench.report import Figure, Part, table
from echomq import Bus
from echomq.keyspace import Keyspace
from echomq.testing.server import RedisProcess

CONCURRENCY = 200  # the worker concurrency of the main drain figures (bench.queue's default)
SWEEP = (1, 10, 50, 200)  # worker concurrencies of the drain-against-concurrency points
TARGET_ONE = 0.8  # issue 14: one worker process drains at >= 0.8 of the raw loop
_PAGE = 1000
_CURVE = "drain, 1 process, concurrency "  # the name of a drain-against-concurrency point, then its value


@dataclass(frozen=True, slots=True)
class Drained:
    """One drain: finished jobs per second (server clock) and the workers' CPU per job (µs)."""

    jobs_per_s: float
    cpu_us_per_job: float


def _span_s(client: redis.Redis, keys: Keyspace) -> float:
    """First claim to last finish over the done rows, in seconds of the server clock."""
    first, last = claim_span_ms(client, keys)
    return max(0.001, (last - first) / 1000)


def drain(url: str, tag: str, count: int, *, processes: int = 1, concurrency: int = CONCURRENCY) -> Drained:
    """Pre-fill ``count`` jobs under ``tag``, drain them with ``processes`` workers, read both figures."""
    asyncio.run(enqueue_batched(url, tag, count))
    client = redis.Redis.from_url(url)
    keys = Keyspace(tag)
    procs = [worker_process(url, tag, "noop", concurrency) for _ in range(processes)]
    try:
        # The CPU before the first claim: start-up (imports, connecting) is not the drain's.
        before = [cpu_s(p.pid) for p in procs]
        deadline = time.monotonic() + 60
        while not int(client.hget(keys.stats, "claimed") or 0):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the workers did not start claiming")
            before = [cpu_s(p.pid) for p in procs]
            time.sleep(0.001)
        deadline = time.monotonic() + 300
        while int(client.hget(keys.stats, "completed") or 0) < count:
            if time.monotonic() > deadline:
                raise RuntimeError("the drain did not finish in 300 s")
            time.sleep(0.02)
        cpu = sum(cpu_s(p.pid) - b for p, b in zip(procs, before, strict=True))
    finally:
        stop(procs)
    span = _span_s(client, keys)
    client.close()
    return Drained(count / span, cpu * 1e6 / count)


def limit(url: str, count: int) -> Drained:
    """The raw pipelined claim + complete loop (:func:`bench.queue.limit_drain`), on a tag of its own,
    with its client's CPU per job (this process's, which runs nothing else meanwhile)."""
    client = redis.Redis.from_url(url)
    bus = Bus.from_url(url, tag=f"dl{time.monotonic_ns() % 10**9}")  # keys and checks; client unused
    try:
        asyncio.run(enqueue_batched(url, bus.tag, count))
        cpu = time.process_time()
        rate = limit_drain(client, bus, count)
        return Drained(rate, (time.process_time() - cpu) * 1e6 / count)
    finally:
        client.close()
        asyncio.run(bus.aclose())


def measure(
    url: str,
    count: int = 20_000,
    *,
    concurrency: int = CONCURRENCY,
    sweep: tuple[int, ...] = SWEEP,
    repeat: int = 1,
) -> list[Figure]:
    """The drain figures, each against the raw loop of the same run (medians of ``repeat`` runs):
    1 and 2 worker processes, the worker's CPU per job, and drain against worker concurrency."""
    run = time.monotonic_ns() % 10**9

    def tag(name: str, i: int) -> str:
        return f"d{run}-{name}-{i}"

    limits, ones, twos = [], [], []
    for i in range(repeat):
        limits.append(limit(url, count))
        ones.append(drain(url, tag("one", i), count, processes=1, concurrency=concurrency))
        twos.append(drain(url, tag("two", i), count, processes=2, concurrency=concurrency))
    lim = statistics.median(d.jobs_per_s for d in limits)
    lim_cpu = statistics.median(d.cpu_us_per_job for d in limits)
    one = statistics.median(d.jobs_per_s for d in ones)
    two = statistics.median(d.jobs_per_s for d in twos)
    cpu = statistics.median(d.cpu_us_per_job for d in ones)
    raw = "raw claim.lua by 500 + complete.lua, pipelined"
    figures = [
        Figure("drain, 1 worker process", one, "jobs/s", lim, raw, target=TARGET_ONE),
        Figure("drain, 2 worker processes", two, "jobs/s", lim, raw),
        Figure(
            "drain, worker CPU per job (1 process)",
            cpu,
            "µs/job",
            lim_cpu,
            "the raw loop's client CPU per job",
            better="lower",
        ),
    ]
    for c in sweep:
        points = [drain(url, tag(f"c{c}", i), count, processes=1, concurrency=c) for i in range(repeat)]
        figures.append(
            Figure(
                f"{_CURVE}{c}",
                statistics.median(d.jobs_per_s for d in points),
                "jobs/s",
                lim,
                raw,
            )
        )
    return figures


def curve(figures: list[Figure]) -> list[tuple[int, float]]:
    """The drain-against-concurrency points of :func:`measure`'s figures: (concurrency, jobs/s)."""
    return [(int(f.name.removeprefix(_CURVE)), f.value) for f in figures if f.name.startswith(_CURVE)]


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument("--drain-jobs", type=int, default=2000 if quick else 20_000)
    parser.add_argument(
        "--drain-repeat", type=int, default=1 if quick else 3, help="runs per figure (median)"
    )


def bench_part(args: argparse.Namespace) -> Part:
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        figures = measure(server.url, args.drain_jobs, repeat=args.drain_repeat)
    info = {"jobs": args.drain_jobs, "repeat": args.drain_repeat, "concurrency": CONCURRENCY}
    return Part(figures, drain=[(float(c), rate) for c, rate in curve(figures)], info=info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--sweep", type=int, nargs="*", default=list(SWEEP), help="concurrencies to chart")
    parser.add_argument("--repeat", type=int, default=1, help="runs per figure (the median is printed)")
    args = parser.parse_args()
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        figures = measure(
            server.url, args.jobs, concurrency=args.concurrency, sweep=tuple(args.sweep), repeat=args.repeat
        )
    print(f"\nEchoMQ drain · {os.cpu_count()} cores · {args.jobs} jobs\n")
    print(table(figures))


if __name__ == "__main__":
    main()
