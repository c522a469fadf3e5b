"""The queue part of ``make bench``: enqueue, drain and pickup as ratios to the Redis limit, and idle cost.

:func:`measure` starts its own redis-server (AOF on, appendfsync everysec, as a production server
would run), measures the Redis limit for each kind of work with a raw EVALSHA loop of the same script on
a blocking client (no worker, no asyncio, the least client overhead there is), then EchoMQ doing that
work, and returns :class:`~bench.report.Figure` rows; :mod:`bench.run` puts them in the one table.
``.venv/bin/python -m bench.queue`` runs this part alone (not as a script path: the file name would
shadow the standard library's ``queue``). Figures, never assertions: nothing fails because a number is
low.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.processes import stop
from bench.report import Figure, Part, table
from echomq import Bus, JobState, NewJob, finish, ids, jobs, lanes, rows
from echomq.keyspace import Keyspace
from echomq.scripts import SyncScripts
from echomq.testing.server import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
LANES = 100
PIPELINE = 1000


def new_jobs(count: int, lanes: int = LANES) -> list[NewJob]:
    return [NewJob(ids.mint("JOB"), f"lane{i % lanes}", b"x" * 32) for i in range(count)]


# --- the Redis limit: raw pipelined EVALSHA loops ------------------------------------------------


def limit_enqueue(client: redis.Redis, bus: Bus, count: int) -> float:
    """enqueue.lua in pipelines of PIPELINE on one blocking client: admissions per second."""
    scripts = SyncScripts(client)
    calls = [jobs.enqueue_call(bus, job) for job in new_jobs(count)]
    start = time.perf_counter()
    for i in range(0, count, PIPELINE):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls[i : i + PIPELINE]:
            scripts.run("enqueue", keys, args, client=pipe)
        pipe.execute()
    return count / (time.perf_counter() - start)


def limit_enqueue_serial(client: redis.Redis, bus: Bus, count: int) -> float:
    """enqueue.lua one call per round trip on one blocking client: the limit for one-by-one admission."""
    scripts = SyncScripts(client)
    calls = [jobs.enqueue_call(bus, job) for job in new_jobs(count)]
    start = time.perf_counter()
    for keys, args in calls:
        scripts.run("enqueue", keys, args)
    return count / (time.perf_counter() - start)


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
    return _pct(times, 50), _pct(times, 99)


# --- EchoMQ ----------------------------------------------------------------------------------------


def _pct(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def enqueue_single(url: str, tag: str, count: int) -> float:
    bus = Bus.from_url(url, tag=tag)
    jobs = new_jobs(count)
    start = time.perf_counter()
    for job in jobs:
        await bus.enqueue(job.job, lane=job.lane, payload=job.payload)
    rate = count / (time.perf_counter() - start)
    await bus.aclose()
    return rate


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


async def pickup_latency(url: str, tag: str, samples: int) -> tuple[float, float]:
    """Enqueue to an idle worker (blocked on the wake list) and read when its handler started."""
    proc = worker_process(url, tag, "stamp", 1)
    bus = Bus.from_url(url, tag=tag)
    latencies = []
    try:
        warm = ids.mint("JOB")
        await bus.enqueue(warm, lane="warm", payload=b"")
        await _wait_done(bus, warm)
        for _ in range(samples):
            await asyncio.sleep(0.02)  # let the worker go idle and block again
            job = ids.mint("JOB")
            t0 = time.time_ns()
            await bus.enqueue(job, lane="lat", payload=b"")
            info = await _wait_done(bus, job)
            assert info is not None
            latencies.append((int(info) - t0) / 1e6)
    finally:
        stop([proc])
        await bus.aclose()
    return _pct(latencies, 50), _pct(latencies, 99)


async def _wait_done(bus: Bus, job: str) -> bytes | None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        info = await bus.inspect(job)
        if info.state is JobState.DONE:
            return info.result
        await asyncio.sleep(0.0005)
    raise RuntimeError(f"{job} was not done in 30 s")


def _commands_run(client: redis.Redis) -> int:
    """Commands the server has run, counting each command a script runs and not the script call itself
    (INFO commandstats counts both), nor this client's INFO."""
    stats = client.info("commandstats")
    skip = {"cmdstat_info", "cmdstat_eval", "cmdstat_evalsha", "cmdstat_eval_ro", "cmdstat_evalsha_ro"}
    return sum(int(v["calls"]) for k, v in stats.items() if k not in skip)


def idle_commands_per_minute(seconds: float) -> float:
    """One idle worker on a server of its own: the commands a minute it makes Redis run, counting every
    command inside its scripts (INFO commandstats before and after; a script call is not counted itself,
    the commands it runs are)."""
    with RedisProcess(appendonly=False) as server:
        proc = worker_process(server.url, "idle", "noop", 10)
        client = redis.Redis.from_url(server.url)
        try:
            time.sleep(3)  # start-up commands are not idle ones
            before = _commands_run(client)
            time.sleep(seconds)
            sent = _commands_run(client) - before
        finally:
            stop([proc])
            client.close()
    return sent * 60 / seconds


@dataclass(frozen=True)
class Sizes:
    jobs: int = 20_000
    latency_samples: int = 300
    idle_seconds: float = 30.0
    concurrency: int = 200


def measure(sizes: Sizes) -> Part:
    """The queue figures (enqueue, drain, pickup against the Redis limit of the same run, on a server of
    its own with AOF on, appendfsync everysec, as a production server would run), and idle cost."""
    n = sizes.jobs
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        url = server.url
        client = redis.Redis.from_url(url)
        version = client.info("server")["redis_version"]
        limit_bus = Bus.from_url(url, tag="limit")  # builds keys and checks input; its client is unused
        lim_enq = limit_enqueue(client, limit_bus, n)
        lim_serial = limit_enqueue_serial(client, limit_bus, min(n, 5000))
        lim_drain = limit_drain(client, limit_bus, n)
        rtt50, rtt99 = limit_roundtrip(client)
        single = asyncio.run(enqueue_single(url, "enq-single", min(n, 5000)))
        batched = asyncio.run(enqueue_batched(url, "enq-batched", n))
        drain1 = drain(url, "drain-1", n, 1, sizes.concurrency)
        drain2 = drain(url, "drain-2", n, 2, sizes.concurrency)
        lat50, lat99 = asyncio.run(pickup_latency(url, "latency", sizes.latency_samples))
        client.close()
    idle = idle_commands_per_minute(sizes.idle_seconds)
    raw_drain = "raw claim.lua + complete.lua, pipelined"
    figures = [
        Figure("enqueue, one by one (async)", single, "jobs/s", lim_serial, "raw enqueue.lua, serial", 0.9),
        Figure("enqueue, bulk by 1000", batched, "jobs/s", lim_enq, "raw pipelined enqueue.lua", 0.9),
        Figure("drain, 1 worker process", drain1, "jobs/s", lim_drain, raw_drain, 0.8),
        Figure("drain, 2 worker processes", drain2, "jobs/s", lim_drain, raw_drain),
        Figure("pickup at idle, p50", lat50, "ms", rtt50, "PING p50", 0.6, "value", "lower"),
        Figure("pickup at idle, p99", lat99, "ms", rtt99, "PING p99", 1.0, "value", "lower"),
        Figure("pickup at idle, p50 / PING p50", lat50, "ms", rtt50, "PING p50", 6.0, better="lower"),
        Figure("pickup at idle, p99 / PING p99", lat99, "ms", rtt99, "PING p99", 6.0, better="lower"),
        Figure("idle cost, 1 worker", idle, "commands/min", None, "", 2.0, "value", "lower"),
    ]
    info = {"redis_version": version, "jobs": n, "concurrency": sizes.concurrency}
    return Part(figures, drain=[(float(sizes.concurrency), drain1)], info=info)


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    q = Sizes(jobs=2000, latency_samples=50, idle_seconds=10.0) if quick else Sizes()
    parser.add_argument("--jobs", type=int, default=q.jobs)
    parser.add_argument("--latency-samples", type=int, default=q.latency_samples)
    parser.add_argument("--idle-seconds", type=float, default=q.idle_seconds)
    parser.add_argument("--concurrency", type=int, default=q.concurrency)


def bench_part(args: argparse.Namespace) -> Part:
    return measure(Sizes(args.jobs, args.latency_samples, args.idle_seconds, args.concurrency))


def main() -> None:
    """This part alone (``python -m bench.queue``): print its table; ``make bench`` runs every part."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    add_arguments(parser, quick="--quick" in sys.argv)
    print(table(bench_part(parser.parse_args()).figures))


if __name__ == "__main__":
    main()
