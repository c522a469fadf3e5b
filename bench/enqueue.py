"""The enqueue benchmark: admission one by one and in bulk, from the asyncio Bus and the blocking SyncBus,
each as a ratio to the raw loop of the same script on a blocking redis-py client, measured in one run.

Run alone with ``.venv/bin/python -m bench.enqueue`` (it starts its own redis-server, AOF on, appendfsync
everysec), or call :func:`measure` on a server of your own. The raw loops are ``bench.queue``'s
references: ``enqueue.lua`` by EVALSHA, one per round trip, and in pipelines of 1000, with every call's
keys and arguments built before the clock starts (so the raw loop does no checking at all, while EchoMQ
checks every job inside its timed calls). Each kind is measured ``rounds`` times, interleaved, and the
median is kept; with other work on the machine wall-clock figures move, so compare the ratios of one
run, and the client's CPU per job (``time.process_time``: this process only, not the server's).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from bench.queue import PIPELINE, _new_jobs
from bench.report import Figure, table
from echomq import Bus, NewJob, SyncBus, jobs
from echomq.scripts import SyncScripts
from echomq.testing.server import RedisProcess

TARGET = 0.9  # issue 14: at least 0.9 of the raw loop, one by one and in bulk
Timing = tuple[float, float]  # (jobs per second, client CPU µs per job)


def _timed(count: int, work: Callable[[], Any]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return count / (time.perf_counter() - wall), (time.process_time() - cpu) / count * 1e6


def raw_serial(client: redis.Redis, bus: SyncBus, batch: list[NewJob]) -> Timing:
    scripts = SyncScripts(client)
    calls = [jobs.enqueue_call(bus, job) for job in batch]
    return _timed(len(batch), lambda: [scripts.run("enqueue", keys, args) for keys, args in calls])


def raw_pipelined(client: redis.Redis, bus: SyncBus, batch: list[NewJob]) -> Timing:
    scripts = SyncScripts(client)
    calls = [jobs.enqueue_call(bus, job) for job in batch]

    def work() -> None:
        for i in range(0, len(calls), PIPELINE):
            pipe = client.pipeline(transaction=False)
            for keys, args in calls[i : i + PIPELINE]:
                scripts.run("enqueue", keys, args, client=pipe)
            pipe.execute()

    return _timed(len(batch), work)


def sync_single(bus: SyncBus, batch: list[NewJob]) -> Timing:
    return _timed(len(batch), lambda: [bus.enqueue(j.job, lane=j.lane, payload=j.payload) for j in batch])


def sync_bulk(bus: SyncBus, batch: list[NewJob]) -> Timing:
    return _timed(
        len(batch),
        lambda: [bus.enqueue_many(batch[i : i + PIPELINE]) for i in range(0, len(batch), PIPELINE)],
    )


async def _async_single(bus: Bus, batch: list[NewJob]) -> None:
    for j in batch:
        await bus.enqueue(j.job, lane=j.lane, payload=j.payload)


async def _async_bulk(bus: Bus, batch: list[NewJob]) -> None:
    for i in range(0, len(batch), PIPELINE):
        await bus.enqueue_many(batch[i : i + PIPELINE])


def async_timed(url: str, tag: str, batch: list[NewJob], *, bulk: bool) -> Timing:
    """One asyncio run: a bus connected (one warm call), then the timed loop."""

    async def run() -> Timing:
        async with Bus.from_url(url, tag=tag) as bus:
            await bus.enqueue_many(_new_jobs(1))  # connect and load the script outside the clock
            wall, cpu = time.perf_counter(), time.process_time()
            await (_async_bulk if bulk else _async_single)(bus, batch)
            return len(batch) / (time.perf_counter() - wall), (time.process_time() - cpu) / len(batch) * 1e6

    return asyncio.run(run())


KINDS = ("raw serial", "raw pipelined", "async single", "sync single", "async bulk", "sync bulk")


def samples(url: str, count: int, rounds: int = 3) -> dict[str, list[Timing]]:
    """Every kind ``rounds`` times, interleaved so that a busy spell of the machine hits them all."""
    client = redis.Redis.from_url(url)
    out: dict[str, list[Timing]] = {kind: [] for kind in KINDS}
    try:
        with SyncBus.from_url(url, tag="enq-sync") as sbus:
            sbus.enqueue_many(_new_jobs(1))  # connect and load the script outside the clock
            for r in range(rounds):
                out["raw serial"].append(raw_serial(client, SyncBus(client, f"raw-s{r}"), _new_jobs(count)))
                out["async single"].append(async_timed(url, f"enq-a{r}", _new_jobs(count), bulk=False))
                out["sync single"].append(sync_single(sbus, _new_jobs(count)))
                bulk = count * 4
                out["raw pipelined"].append(
                    raw_pipelined(client, SyncBus(client, f"raw-p{r}"), _new_jobs(bulk))
                )
                out["async bulk"].append(async_timed(url, f"enq-ab{r}", _new_jobs(bulk), bulk=True))
                out["sync bulk"].append(sync_bulk(sbus, _new_jobs(bulk)))
    finally:
        client.close()
    return out


def measure(url: str, count: int, rounds: int = 3) -> list[Figure]:
    """The enqueue figures: one by one (``count`` jobs a round) and in bulk (4x that, by 1000), from
    the asyncio Bus and the SyncBus, against the raw loops; then the client's CPU µs per job."""
    got = samples(url, count, rounds)
    rate = {kind: statistics.median(r for r, _ in got[kind]) for kind in KINDS}
    cpu = {kind: statistics.median(c for _, c in got[kind]) for kind in KINDS}
    serial, piped = "raw enqueue.lua, one per round trip", "raw pipelined enqueue.lua"
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
    for kind, ref in (
        ("async single", "raw serial"),
        ("sync single", "raw serial"),
        ("async bulk", "raw pipelined"),
        ("sync bulk", "raw pipelined"),
    ):
        figures.append(
            Figure(
                f"client CPU per job, {kind} (µs)",
                cpu[kind],
                "µs",
                cpu[ref],
                f"{ref} loop's CPU µs/job",
                better="lower",
            )
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3000, help="jobs one by one per round (bulk: 4x)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        figures = measure(server.url, args.jobs, args.rounds)
    head = f"{args.jobs} jobs one by one, {4 * args.jobs} in bulk, median of {args.rounds}"
    print(f"\nEchoMQ enqueue benchmark · {head}\n")
    print(table(figures))


if __name__ == "__main__":
    main()
