"""Pickup latency at idle and the idle cost of a worker, each on a redis-server of its own.

Run alone with ``.venv/bin/python -m bench.pickup`` (it prints one table); ``make bench`` calls
:func:`measure` and puts its rows in the whole table.

* **Pickup latency at idle**: one worker process (concurrency 1, handler ``bench.handlers:stamp``) blocks
  on the wake list; the benchmark enqueues one job at a time through the public API, after a pause that
  lets the worker block again, and reads back the wall-clock time at which the handler started. Latency is
  that time minus the time just before the enqueue was called: the producer's call, the token, the
  claim, and the dispatch to the handler. It is printed next to the PING round trip of a blocking client
  in the same run (the floor under any pickup), as values and as ratios. Each sample starts from idle
  (every process asleep for :data:`PAUSE_S`), and a round trip that starts from idle costs more than one
  in a busy loop (the processes and the CPU wake first: about 0.3 ms instead of 0.1 on a 2-core VM), so
  the ratio is to PINGs timed the same way, each after the same pause, interleaved with the samples; the
  PING of a busy loop is printed too. Beside them, the Redis floor under any pickup, timed the same way
  (:func:`raw_wakes`): an LPUSH waking a bare BLPOP in another process, no claim, no asyncio, no handler.
  On a 2-core VM that floor alone is about 0.45-0.65 ms at p50, so the issue's absolute targets (p50 0.6 ms,
  p99 1 ms) are below what Redis gives a waiting process here; the ratios are the figures to compare.
* **Idle cost**: one worker with nothing to do, every command the server runs counted from ``INFO
  commandstats``, which includes those Lua scripts run inside themselves. An idle worker's cost comes in
  blocks of :data:`~echomq.worker.fetcher.IDLE_CAP_S` (600 s), too long to wait for several, so the
  worker here runs with a short cap (``--idle-cap``), the commands of each block are counted over several
  blocks, and the figure is that count per block times the blocks a minute at the default cap. What a
  block does does not depend on its length (one BLPOP, the claim behind it, one sweep).

On a shared machine the latencies move with the load of other processes: judge them by the ratio to
the PING of the same run, and repeat a run before believing a change.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import time
from typing import Literal

import redis

from bench.processes import stop
from bench.queue import limit_roundtrip, worker_process
from bench.report import Figure, Part, percentile, table
from echomq import Bus, JobState, Worker, ids
from echomq.testing.server import RedisProcess
from echomq.worker.fetcher import IDLE_CAP_S
from echomq.worker.runner import IDLE_COMMANDS_PER_MIN

PAUSE_S = 0.02  # between two samples: the worker finishes, claims nothing more and blocks again
_SAME = f"PING from idle ({PAUSE_S * 1000:g} ms pause), same run"
_RAW = "raw wake: LPUSH here, BLPOP in another process, from idle"


async def _result(bus: Bus, job: str) -> bytes:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = await bus.inspect(job)
        if info.state is JobState.DONE and info.result is not None:
            return info.result
        await asyncio.sleep(0.002)
    raise RuntimeError(f"{job} was not done in 30 s")


def _ping_ms(client: redis.Redis) -> float:
    t0 = time.perf_counter_ns()
    client.ping()
    return (time.perf_counter_ns() - t0) / 1e6


async def pickup_latencies(url: str, tag: str, samples: int) -> tuple[list[float], list[float]]:
    """Enqueue → the idle worker's handler starts, in ms, ``samples`` times (one worker process); and as
    many PING round trips of a blocking client, each after the same pause (see the module)."""
    proc = worker_process(url, tag, "stamp", 1)
    bus = Bus.from_url(url, tag=tag)
    client = redis.Redis.from_url(url)
    latencies, pings = [], []
    try:
        for _ in range(3):  # warm-up: the worker is up, its scripts loaded, its connections open
            warm = ids.mint("JOB")
            await bus.enqueue(warm, lane="warm", payload=b"")
            await _result(bus, warm)
        client.ping()
        for _ in range(samples):
            time.sleep(PAUSE_S)  # every process idle (this one too: no event loop turning)
            pings.append(_ping_ms(client))
            await asyncio.sleep(PAUSE_S)  # the worker goes idle and blocks again
            job = ids.mint("JOB")
            t0 = time.time_ns()
            await bus.enqueue(job, lane="lat", payload=b"")
            await asyncio.sleep(PAUSE_S / 4)  # no polling while the worker picks it up
            latencies.append((int(await _result(bus, job)) - t0) / 1e6)
    finally:
        stop([proc])
        await bus.aclose()
        client.close()
    return latencies, pings


async def _noop(job: object) -> None:
    """The idle worker's handler: it never runs."""


def _calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


async def idle_commands_per_block(cap_s: float, blocks: int) -> float:
    """Commands (scripts' inner commands included) per idle block of one worker, on a server of its own."""
    with RedisProcess(appendonly=False) as server:
        client = redis.Redis(port=server.port)
        async with Bus.from_url(server.url, tag="idle") as bus:
            worker = Worker(bus, _noop)
            worker.fetcher.idle_cap_s = cap_s
            task = asyncio.create_task(worker.run())
            await asyncio.sleep(cap_s * 1.5)  # start-up (a sweep, a claim) is not idle
            before = _calls(client)
            await asyncio.sleep(cap_s * blocks)
            after = _calls(client)
            worker.stop()
            await task
        client.close()
    delta = {name: after[name] - before.get(name, 0) for name in after}
    delta.pop("info", None)
    return sum(delta.values()) / max(1, delta.get("blpop", 0))


def _raw_waiter(url: str, count: int, out: multiprocessing.Queue[list[int]]) -> None:
    client = redis.Redis.from_url(url)
    stamps = []
    for _ in range(count):
        client.blpop(["rawwake"], 0)
        stamps.append(time.time_ns())
    client.close()
    out.put(stamps)


def raw_wakes(url: str, samples: int) -> list[float]:
    """The Redis floor under a pickup, in ms: a blocking client in a process of its own waits in BLPOP,
    this one LPUSHes after the same pause as a pickup sample; the waiter's clock at its BLPOP's return
    less this one's just before the LPUSH (no claim, no asyncio, no handler)."""
    out: multiprocessing.Queue[list[int]] = multiprocessing.Queue()
    waiter = multiprocessing.Process(target=_raw_waiter, args=(url, samples, out))
    waiter.start()
    client = redis.Redis.from_url(url)
    sent = []
    try:
        while not any(c.get("cmd") == "blpop" for c in client.client_list(_type="normal")):
            time.sleep(0.01)
        for _ in range(samples):
            time.sleep(2 * PAUSE_S)
            sent.append(time.time_ns())
            client.lpush("rawwake", b"x")
        stamps = out.get(timeout=60)
    finally:
        waiter.join(timeout=10)
        client.close()
    return [(woke - at) / 1e6 for at, woke in zip(sent, stamps, strict=True)]


def measure(samples: int = 300, idle_cap_s: float = 1.0, idle_blocks: int = 6) -> list[Figure]:
    """Pickup p50/p99 (values and ratios to PING in the same run) and idle commands a minute."""
    with RedisProcess(appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        busy50, busy99 = limit_roundtrip(client)
        latencies, pings = asyncio.run(pickup_latencies(server.url, "pickup", samples))
        raw = raw_wakes(server.url, samples)
        client.close()
    raw50, raw99 = percentile(raw, 50), percentile(raw, 99)
    lat50, lat99 = percentile(latencies, 50), percentile(latencies, 99)
    ping50, ping99 = percentile(pings, 50), percentile(pings, 99)
    per_block = asyncio.run(idle_commands_per_block(idle_cap_s, idle_blocks))
    per_minute = per_block * 60 / IDLE_CAP_S
    lower: Literal["lower"] = "lower"
    return [
        Figure("PING in a busy loop, p50", busy50, "ms", None, f"p99 {busy99:.2f} ms", better=lower),
        Figure("pickup latency at idle, p50", lat50, "ms", ping50, "PING p50", 0.6, "value", lower),
        Figure("pickup latency at idle, p99", lat99, "ms", ping99, "PING p99", 1.0, "value", lower),
        Figure("pickup p50 / PING p50", lat50, "ms", ping50, _SAME, 6.0, "ratio", lower),
        Figure("pickup p99 / PING p99", lat99, "ms", ping99, _SAME, 6.0, "ratio", lower),
        Figure("pickup p50 / raw LPUSH → BLPOP wake p50", lat50, "ms", raw50, _RAW, better=lower),
        Figure("pickup p99 / raw LPUSH → BLPOP wake p99", lat99, "ms", raw99, _RAW, better=lower),
        Figure(
            "idle Redis commands / min / worker (scripts' commands counted)",
            per_minute,
            "cmd/min",
            per_block,
            f"commands per idle block, one block per {IDLE_CAP_S:g} s",
            float(IDLE_COMMANDS_PER_MIN),
            "value",
            lower,
        ),
    ]


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument("--pickup-samples", type=int, default=50 if quick else 300)
    parser.add_argument("--idle-blocks", type=int, default=2 if quick else 6, help="idle blocks counted")


def bench_part(args: argparse.Namespace) -> Part:
    figures = measure(args.pickup_samples, idle_blocks=args.idle_blocks)
    return Part(figures, info={"samples": args.pickup_samples, "idle_blocks": args.idle_blocks})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--samples", type=int, default=300, help="pickup latency samples")
    parser.add_argument("--idle-cap", type=float, default=1.0, help="the idle worker's cap, seconds")
    parser.add_argument("--idle-blocks", type=int, default=6, help="idle blocks counted")
    args = parser.parse_args()
    figures = measure(args.samples, args.idle_cap, args.idle_blocks)
    print(f"\nEchoMQ pickup and idle cost · {os.cpu_count()} cores · {args.samples} samples\n")
    print(table(figures))


if __name__ == "__main__":
    main()
