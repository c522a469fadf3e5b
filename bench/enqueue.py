"""The enqueue benchmark: admission one by one and in bulk, from the asyncio Bus and the blocking SyncBus,
each as a ratio to the raw loop of the same script on a blocking redis-py client, measured in one run.

Run alone with ``.venv/bin/python -m bench.enqueue`` (it starts its own redis-server, AOF on, appendfsync
everysec), or call :func:`measure` on a server of your own. The raw loops are ``bench.queue``'s
references: ``enqueue.lua`` by EVALSHA, one per round trip, and in pipelines of 1000, with every call's
keys and arguments built before the clock starts (so the raw loop does no checking at all, while EchoMQ
checks every job inside its timed calls). The kinds take turns of 100 jobs (one batch in bulk), their
order rotating, and each kind's time is summed over its turns, so a busy spell of a shared machine falls
on all of them alike; still, wall-clock figures move from run to run: compare the ratios of one run, and
the client's CPU per job (``time.process_time``: this process only, not the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

import redis

from bench.queue import PIPELINE, new_jobs
from bench.report import Figure, Part, table
from echomq import Bus, NewJob, SyncBus, jobs
from echomq.scripts import SyncScripts
from echomq.testing.server import RedisProcess

TARGET = 0.9  # issue 14: at least 0.9 of the raw loop, one by one and in bulk


class Clock:
    """Wall and CPU time summed over the turns of one kind of work."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.jobs = 0

    def time(self, jobs: int, work: Callable[[], Any]) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        work()
        self.wall += time.perf_counter() - wall
        self.cpu += time.process_time() - cpu
        self.jobs += jobs

    @property
    def rate(self) -> float:
        return self.jobs / self.wall

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.jobs * 1e6


class Producers:
    """The four ways to enqueue, on one server: raw EVALSHA on a blocking client, the asyncio Bus (on an
    event loop of its own, so its turns interleave with the others), and the SyncBus."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.raw = SyncScripts(self.client)
        self.raw_bus = SyncBus(self.client, tag="enq-raw")  # builds the raw calls; its scripts are unused
        self.sync = SyncBus.from_url(url, tag="enq-sync")
        self.loop = asyncio.new_event_loop()
        self.bus = Bus.from_url(url, tag="enq-async")
        for warm in (self.sync.enqueue_many, self.raw_bus.enqueue_many):
            warm(new_jobs(1))  # connected and the script loaded before any clock starts
        self.loop.run_until_complete(self.bus.enqueue_many(new_jobs(1)))

    def close(self) -> None:
        self.loop.run_until_complete(self.bus.aclose())
        self.loop.close()
        self.sync.close()
        self.client.close()

    def raw_serial(self, batch: list[NewJob]) -> Callable[[], Any]:
        calls = [jobs.enqueue_call(self.raw_bus, job) for job in batch]  # built before the clock starts
        return lambda: [self.raw.run("enqueue", keys, args) for keys, args in calls]

    def raw_pipelined(self, batch: list[NewJob]) -> Callable[[], Any]:
        calls = [jobs.enqueue_call(self.raw_bus, job) for job in batch]

        def work() -> None:
            pipe = self.client.pipeline(transaction=False)
            for keys, args in calls:
                self.raw.run("enqueue", keys, args, client=pipe)
            pipe.execute()

        return work

    def async_single(self, batch: list[NewJob]) -> Callable[[], Any]:
        async def work() -> None:
            for j in batch:
                await self.bus.enqueue(j.job, lane=j.lane, payload=j.payload)

        return lambda: self.loop.run_until_complete(work())

    def async_bulk(self, batch: list[NewJob]) -> Callable[[], Any]:
        return lambda: self.loop.run_until_complete(self.bus.enqueue_many(batch))

    def sync_single(self, batch: list[NewJob]) -> Callable[[], Any]:
        return lambda: [self.sync.enqueue(j.job, lane=j.lane, payload=j.payload) for j in batch]

    def sync_bulk(self, batch: list[NewJob]) -> Callable[[], Any]:
        return lambda: self.sync.enqueue_many(batch)


SINGLE = ("raw serial", "async single", "sync single")
BULK = ("raw pipelined", "async bulk", "sync bulk")
TURN = 100  # jobs one by one per turn; a bulk turn is one batch of PIPELINE


def clocks(url: str, count: int) -> dict[str, Clock]:
    """``count`` jobs one by one and ``4 * count`` in bulk for each kind, in short turns that take
    their order in rotation, so a busy spell of the machine falls on every kind alike."""
    producers = Producers(url)
    work = {
        "raw serial": producers.raw_serial,
        "async single": producers.async_single,
        "sync single": producers.sync_single,
        "raw pipelined": producers.raw_pipelined,
        "async bulk": producers.async_bulk,
        "sync bulk": producers.sync_bulk,
    }
    out = {kind: Clock() for kind in (*SINGLE, *BULK)}
    try:
        for kinds, size, turns in ((SINGLE, TURN, count // TURN), (BULK, PIPELINE, 4 * count // PIPELINE)):
            for turn in range(max(1, turns)):
                for kind in kinds[turn % 3 :] + kinds[: turn % 3]:
                    batch = new_jobs(size)
                    out[kind].time(size, work[kind](batch))
    finally:
        producers.close()
    return out


def measure(url: str, count: int) -> list[Figure]:
    """The enqueue figures: one by one (``count`` jobs) and in bulk (4x that, by 1000), from the asyncio
    Bus and the SyncBus, against the raw loops of the same run; then the client's CPU µs per job."""
    got = clocks(url, count)
    serial, piped = "raw enqueue.lua, one per round trip", "raw pipelined enqueue.lua"
    rate = {kind: clock.rate for kind, clock in got.items()}
    figures = [
        Figure("enqueue raw, one per round trip (jobs/s)", rate["raw serial"], "jobs/s", None, ""),
        Figure(
            "enqueue one by one, async Bus (jobs/s)",
            rate["async single"],
            "jobs/s",
            rate["raw serial"],
            serial,
            TARGET,
        ),
        Figure(
            "enqueue one by one, SyncBus (jobs/s)",
            rate["sync single"],
            "jobs/s",
            rate["raw serial"],
            serial,
            TARGET,
        ),
        Figure("enqueue raw, pipelined by 1000 (jobs/s)", rate["raw pipelined"], "jobs/s", None, ""),
        Figure(
            "enqueue_many by 1000, async Bus (jobs/s)",
            rate["async bulk"],
            "jobs/s",
            rate["raw pipelined"],
            piped,
            TARGET,
        ),
        Figure(
            "enqueue_many by 1000, SyncBus (jobs/s)",
            rate["sync bulk"],
            "jobs/s",
            rate["raw pipelined"],
            piped,
            TARGET,
        ),
    ]
    for kind, ref in (*((k, "raw serial") for k in SINGLE[1:]), *((k, "raw pipelined") for k in BULK[1:])):
        figures.append(
            Figure(
                f"client CPU per job, {kind} (µs)",
                got[kind].cpu_us,
                "µs",
                got[ref].cpu_us,
                f"{ref} loop's CPU µs/job",
                better="lower",
            )
        )
    return figures


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument(
        "--enqueue-jobs", type=int, default=1000 if quick else 5000, help="one by one per kind (bulk: 4x)"
    )


def bench_part(args: argparse.Namespace) -> Part:
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        return Part(measure(server.url, args.enqueue_jobs), info={"jobs": args.enqueue_jobs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000, help="jobs one by one per kind (bulk: 4x)")
    args = parser.parse_args()
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        figures = measure(server.url, args.jobs)
    head = (
        f"{args.jobs} jobs one by one and {4 * args.jobs} in bulk per kind, in turns of {TURN} / {PIPELINE}"
    )
    print(f"\nEchoMQ enqueue benchmark · {head}\n")
    print(table(figures))


if __name__ == "__main__":
    main()
