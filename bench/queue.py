"""The pieces the parts of ``make bench`` share: the raw Redis loops (the limits every figure is a ratio
to: the same script by EVALSHA on a blocking client, no worker, no asyncio, the least client overhead
there is), the fillers, and the drain timed from the rows (server clock).

Not a part itself: :mod:`bench.enqueue`, :mod:`bench.pickup`, :mod:`bench.drain` and :mod:`bench.scale`
measure with these. Figures, never assertions: nothing fails because a number is low.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from bench.processes import stop
from bench.report import percentile
from echomq import Bus, NewJob, finish, ids, lanes, rows
from echomq.keyspace import Keyspace
from echomq.scripts import SyncScripts

ROOT = Path(__file__).resolve().parent.parent
LANES = 100
PIPELINE = 1000


def new_jobs(count: int, lanes: int = LANES) -> list[NewJob]:
    return [NewJob(ids.mint("JOB"), f"lane{i % lanes}", b"x" * 32) for i in range(count)]


# --- the Redis limit: raw pipelined EVALSHA loops ------------------------------------------------


def limit_drain(client: redis.Redis, bus: Bus, count: int, batch: int = 500) -> float:
    """claim.lua (batch) then complete.lua for each, pipelined: finished jobs per second."""
    scripts = SyncScripts(client)
    claim_keys, claim_args = lanes.claim_call(bus, batch, 30_000, "")
    start = time.perf_counter()
    done = 0
    while done < count:
        claimed = lanes.claimed_from_reply(scripts.run("claim", claim_keys, claim_args), "")
        if not claimed.jobs:
            break
        pipe = client.pipeline(transaction=False)
        for claim in claimed.jobs:
            scripts.run("complete", *finish.complete_call(bus, claim, b""), client=pipe)
        pipe.execute()
        done += len(claimed.jobs)
    return done / (time.perf_counter() - start)


def limit_roundtrip(client: redis.Redis, samples: int = 2000) -> tuple[float, float]:
    """PING round trips in ms (p50, p99): the floor under any pickup latency."""
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        client.ping()
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return percentile(times, 50), percentile(times, 99)


# --- EchoMQ ----------------------------------------------------------------------------------------


async def enqueue_batched(url: str, tag: str, count: int, lanes: int = LANES) -> float:
    bus = Bus.from_url(url, tag=tag)
    jobs = new_jobs(count, lanes)
    start = time.perf_counter()
    for i in range(0, count, PIPELINE):
        await bus.enqueue_many(jobs[i : i + PIPELINE])
    rate = count / (time.perf_counter() - start)
    await bus.aclose()
    return rate


def worker_process(url: str, tag: str, handler: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=url, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "echomq.cli", "worker", f"bench.handlers:{handler}"]
    argv += ["--tag", tag, "--concurrency", str(concurrency), "--lease-ms", "30000"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def drain(url: str, tag: str, count: int, processes: int, concurrency: int, lanes: int = LANES) -> float:
    """Pre-fill ``count`` jobs over ``lanes`` lanes, start the worker processes, and time first claim to
    last finish.

    Both ends are read from the rows (server clock), so process start-up is not counted.
    """
    asyncio.run(enqueue_batched(url, tag, count, lanes))
    client = redis.Redis.from_url(url)
    keys = Keyspace(tag)
    procs = [worker_process(url, tag, "noop", concurrency) for _ in range(processes)]
    try:
        deadline = time.monotonic() + 300
        while int(client.hget(keys.stats, "completed") or 0) < count:
            if time.monotonic() > deadline:
                raise RuntimeError("drain did not finish in 300 s")
            time.sleep(0.05)
    finally:
        stop(procs)
    first, last = claim_span_ms(client, keys)
    client.close()
    return count / max(0.001, (last - first) / 1000)


def claim_span_ms(client: redis.Redis, keys: Keyspace) -> tuple[int, int]:
    """The first claim and the last finish (server ms) over the rows of done: the one place this bench
    reads row fields by name (JobInfo has no claim time), to adapt when the row layout changes."""
    first, last = None, 0
    members = [m.decode() for m in client.zrange(keys.done, 0, -1)]  # type: ignore[union-attr]
    for i in range(0, len(members), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for job in members[i : i + PIPELINE]:
            pipe.hmget(keys.job(job), rows.CLAIMED_AT, rows.FINISHED)
        for claimed, finished in pipe.execute():
            first = int(claimed) if first is None else min(first, int(claimed))
            last = max(last, int(finished))
    assert first is not None
    return first, last
