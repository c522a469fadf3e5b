"""The queue benchmark: EchoMQ's figures as ratios to the Redis limit, measured in one run.

Run with ``make bench`` (or ``.venv/bin/python -m bench.queue``; not as a script path, since the
file name would shadow the standard library's ``queue``). It starts its own redis-server
(AOF on, appendfsync everysec, as a production server would run), measures the Redis limit for each
kind of work with a raw pipelined EVALSHA loop of the same script on a blocking client (no worker, no
asyncio, the least client overhead there is), then measures EchoMQ doing that work, and prints one
table. Figures are figures, never assertions: nothing here fails because a number is low.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

from bench import game
from bench.processes import stop
from echomq import Bus, NewJob, finish, ids, jobs, lanes
from echomq.keyspace import Keyspace
from echomq.scripts import SyncScripts
from echomq.testing.monitor import CommandMonitor
from echomq.testing.server import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LANES = 100
PIPELINE = 1000


def _new_jobs(count: int, lanes: int = LANES) -> list[NewJob]:
    return [NewJob(ids.mint("JOB"), f"lane{i % lanes}", b"x" * 32) for i in range(count)]


# --- the Redis limit: raw pipelined EVALSHA loops ------------------------------------------------


def limit_enqueue(client: redis.Redis, bus: Bus, count: int) -> float:
    """enqueue.lua in pipelines of PIPELINE on one blocking client: admissions per second."""
    scripts = SyncScripts(client)
    calls = [jobs.enqueue_call(bus, job) for job in _new_jobs(count)]
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
    calls = [jobs.enqueue_call(bus, job) for job in _new_jobs(count)]
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
    jobs = _new_jobs(count)
    start = time.perf_counter()
    for job in jobs:
        await bus.enqueue(job.job, lane=job.lane, payload=job.payload)
    rate = count / (time.perf_counter() - start)
    await bus.aclose()
    return rate


async def enqueue_batched(url: str, tag: str, count: int) -> float:
    bus = Bus.from_url(url, tag=tag)
    jobs = _new_jobs(count)
    start = time.perf_counter()
    for i in range(0, count, PIPELINE):
        await bus.enqueue_many(jobs[i : i + PIPELINE])
    rate = count / (time.perf_counter() - start)
    await bus.aclose()
    return rate


def _worker(url: str, tag: str, handler: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=url, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "echomq.cli", "worker", f"bench.handlers:{handler}"]
    argv += ["--tag", tag, "--concurrency", str(concurrency), "--lease-ms", "30000"]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def drain(url: str, tag: str, count: int, processes: int, concurrency: int) -> float:
    """Pre-fill ``count`` jobs, start the worker processes, and time first claim to last finish.

    Both ends are read from the rows (server clock), so process start-up is not counted.
    """
    asyncio.run(enqueue_batched(url, tag, count))
    client = redis.Redis.from_url(url)
    keys = Keyspace(tag)
    procs = [_worker(url, tag, "noop", concurrency) for _ in range(processes)]
    try:
        deadline = time.monotonic() + 300
        while int(client.hget(keys.stats, "completed") or 0) < count:
            if time.monotonic() > deadline:
                raise RuntimeError("drain did not finish in 300 s")
            time.sleep(0.05)
    finally:
        stop(procs)
    first, last = None, 0
    members = [m.decode() for m in client.zrange(keys.done, 0, -1)]
    for i in range(0, len(members), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for job in members[i : i + PIPELINE]:
            pipe.hmget(keys.job(job), "c", "f")  # claimed_at, finished (echomq.rows)
        for claimed, finished in pipe.execute():
            first = int(claimed) if first is None else min(first, int(claimed))
            last = max(last, int(finished))
    client.close()
    assert first is not None
    return count / max(0.001, (last - first) / 1000)


async def pickup_latency(url: str, tag: str, samples: int) -> tuple[float, float]:
    """Enqueue to an idle worker (blocked on the wake list) and read when its handler started."""
    proc = _worker(url, tag, "stamp", 1)
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
        row = await bus.redis.hmget(bus.keys.job(job), "s", "x")  # state, result (echomq.rows)
        if row[0] == b"done":
            return row[1]  # type: ignore[no-any-return]
        await asyncio.sleep(0.0005)
    raise RuntimeError(f"{job} was not done in 30 s")


def idle_commands_per_minute(seconds: float) -> float:
    """One idle worker on a server of its own: the commands it sends per minute (MONITOR, scripts' inner
    commands left out: a script call is one command)."""
    with RedisProcess(appendonly=False) as server:
        proc = _worker(server.url, "idle", "noop", 10)
        try:
            time.sleep(3)  # start-up commands are not idle ones
            monitor = CommandMonitor(server.port)
            time.sleep(seconds)
            sent = monitor.close()
        finally:
            stop([proc])
    return len(sent) * 60 / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, default=200)
    game.add_arguments(parser)
    args = parser.parse_args()
    n = args.jobs
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
        drain1 = drain(url, "drain-1", n, 1, args.concurrency)
        drain2 = drain(url, "drain-2", n, 2, args.concurrency)
        lat50, lat99 = asyncio.run(pickup_latency(url, "latency", args.latency_samples))
        client.close()
    game_figures = game.from_arguments(args)  # the game loop, in the same run, on a server of its own
    idle = idle_commands_per_minute(args.idle_seconds)
    rows = [
        ("enqueue, one by one (jobs/s)", single, lim_serial, "raw enqueue.lua, one per round trip"),
        ("enqueue, batched by 1000 (jobs/s)", batched, lim_enq, "raw pipelined enqueue.lua"),
        ("drain, 1 worker process (jobs/s)", drain1, lim_drain, "raw claim.lua + complete.lua"),
        ("drain, 2 worker processes (jobs/s)", drain2, lim_drain, "raw claim.lua + complete.lua"),
        ("pickup latency at idle, p50 (ms)", lat50, rtt50, "PING round trip p50"),
        ("pickup latency at idle, p99 (ms)", lat99, rtt99, "PING round trip p99"),
        ("idle Redis commands / min / worker", idle, 20.0, "budget (target)"),
    ]
    print(f"\nEchoMQ queue benchmark · redis-server {version} · {os.cpu_count()} cores · {n} jobs\n")
    print("| figure | EchoMQ | Redis limit | ratio | limit measured as |")
    print("|---|---:|---:|---:|---|")
    for name, value, limit, how in rows:
        print(f"| {name} | {value:,.2f} | {limit:,.2f} | {value / limit:.2f} | {how} |")
    game.print_table(game_figures)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "redis_version": version,
        "jobs": n,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "rows": [{"figure": r[0], "value": r[1], "limit": r[2], "limit_as": r[3]} for r in rows],
        "game": game.to_json(game_figures),
    }
    (RESULTS / "queue-latest.json").write_text(json.dumps(out, indent=2))
    print(f"\n(saved to {RESULTS.relative_to(ROOT) / 'queue-latest.json'})")


if __name__ == "__main__":
    main()
