"""The soak: memory before and after 1,000,000 jobs enqueued and drained at full speed ("trims keep up").

On a redis-server of its own (no AOF: ``used_memory`` then holds only the data, no rewrite buffers), one
worker process (``python -m bench.soak --worker``: :class:`echomq.Worker` on a bus whose result ttl is 0,
so each finished row is trimmed to its tombstone by the next finishes, and the dedup window the default
24 h, so every tombstone stays) drains what the bench enqueues in bulk at full speed, in chunks. After
each chunk the bench waits for the drain, sweeps, lets the claim records (kept one lease) expire, and
reads ``used_memory`` and the tombstones left (fields of the shared tombstone hashes) and any whole
row.

Trims keep up when, once the soak's tombstone hashes are deleted at the end, ``used_memory`` is what it
was before the soak (the first job's tombstone aside): target ≤ 1.05, and no whole row is left; the
tombstones' own bytes (``used_memory`` freed by deleting their hashes) per tombstone, target ≤ 120 B
(issue 14's tombstone). (A ratio to "before + tombstones x the size after the first chunk" would read a
hash table's power-of-two growth as a leak: one step of a million-field hash is 8 MB.)
:func:`bench_part` is the part of ``make bench``; ``python -m bench.soak --soak-jobs N`` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench.handlers import noop
from bench.processes import stop
from bench.report import Figure, Part, table
from echomq import Bus, NewJob, Settings, Worker, ids
from echomq.keyspace import Keyspace
from echomq.testing.server import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
TAG = "soak"
SETTINGS = Settings(result_ttl_ms=0)  # trimmed at once; the dedup window (24 h) keeps every tombstone
LEASE_MS = 1000  # claim records live one lease: short, so they are gone when memory is read
JOBS = 1_000_000
CHUNKS = 10
PIPELINE = 1000
LANES = 1000
PAYLOAD = b"p" * 100  # issue 14's memory figures use a 100-byte payload
LINEAR_TARGET = 1.05
TOMBSTONE_TARGET = 120.0


def _worker_main(url: str) -> None:
    async def run() -> None:
        async with Bus.from_url(url, tag=TAG, settings=SETTINGS) as bus:
            worker = Worker(bus, noop, concurrency=200, lease_ms=LEASE_MS)
            await worker.run(handle_signals=True)

    asyncio.run(run())


def _worker(url: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "bench.soak", "--worker", url]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def used_memory(client: redis.Redis) -> int:
    """``used_memory`` once lazy frees have settled."""
    for _ in range(200):
        info: dict[str, Any] = client.info("memory")
        if int(info.get("lazyfree_pending_objects", 0)) == 0:
            return int(info["used_memory"])
        time.sleep(0.01)
    return int(client.info("memory")["used_memory"])


def count_keys(client: redis.Redis, pattern: str) -> int:
    """Keys matching ``pattern`` (SCAN also deletes the expired keys it visits, e.g. claim records)."""
    return sum(1 for _ in client.scan_iter(match=pattern, count=10_000))


def completed(client: redis.Redis) -> int:
    """The bus's ``completed`` counter (the stats hash)."""
    return int(client.hget(Keyspace(TAG).stats, "completed") or 0)


async def _enqueue(bus: Bus, count: int) -> None:
    for i in range(0, count, PIPELINE):
        size = min(PIPELINE, count - i)
        await bus.enqueue_many(
            NewJob(ids.mint("JOB"), f"lane{(i + k) % LANES}", PAYLOAD) for k in range(size)
        )


async def _checkpoint(
    client: redis.Redis, bus: Bus, finished: int, timeout_s: float = 600.0
) -> dict[str, int]:
    """Wait until ``finished`` jobs are done, sweep, let claim records expire; read memory and rows."""
    deadline = time.monotonic() + timeout_s
    while completed(client) < finished:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{finished} jobs were not finished in {timeout_s:.0f} s")
        await asyncio.sleep(0.05)
    await bus.sweep()  # trims the done rows past the result ttl that no later finish trimmed
    await asyncio.sleep(LEASE_MS / 1000 + 0.3)
    keys = Keyspace(TAG)
    claims = count_keys(client, f"{keys.prefix}claim:*")  # purges the expired ones
    # A trimmed job leaves its row: its tombstone is a field of a shared hash (Keyspace.tombstone).
    tombstones = sum(int(client.hlen(key)) for key in client.scan_iter(match=f"{keys.prefix}tomb:*"))
    whole = count_keys(client, f"{keys.prefix}job:*") + int(client.zcard(keys.done))
    rows = tombstones + whole
    memory = used_memory(client)
    return {
        "finished": finished,
        "used_memory": memory,
        "rows": rows,
        "whole": whole,
        "claims": claims,
    }


async def _soak(url: str, client: redis.Redis, jobs: int, chunks: int) -> list[dict[str, int]]:
    async with Bus.from_url(url, tag=TAG, settings=SETTINGS) as bus:
        await _enqueue(bus, 1)  # the worker is up, its scripts loaded: not the soak's memory
        points = [await _checkpoint(client, bus, 1)]
        size = max(1, jobs // chunks)
        done = 0
        while done < jobs:
            step = min(size, jobs - done)
            await _enqueue(bus, step)
            done += step
            points.append(await _checkpoint(client, bus, 1 + done))
    return points


def soak(jobs: int, chunks: int = CHUNKS) -> dict[str, Any]:
    """Run the soak on a server of its own; returns the checkpoints (the first is before the soak)."""
    with RedisProcess(appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        proc = _worker(server.url)
        started = time.monotonic()
        try:
            points = asyncio.run(_soak(server.url, client, jobs, chunks))
        finally:
            stop([proc])
        # What the tombstones hold, exactly: used_memory less what is left once their hashes are gone
        # (MEMORY USAGE of a hash table caught mid-resize may not count its second bucket array).
        for key in list(client.scan_iter(match=f"{Keyspace(TAG).prefix}tomb:*")):
            client.delete(key)
        cleared = used_memory(client)
        client.close()
    return {"jobs": jobs, "checkpoints": points, "cleared": cleared, "seconds": time.monotonic() - started}


def figures(result: dict[str, Any]) -> list[Figure]:
    before, after = result["checkpoints"][0], result["checkpoints"][-1]
    rest_before, rest_after = before["used_memory"], result["cleared"]
    grown = after["rows"] - before["rows"]
    per_tombstone = (after["used_memory"] - result["cleared"]) / max(1, grown)
    n = f"{result['jobs']:,}"
    return [
        Figure(
            f"soak: used_memory after {n} jobs, their {grown:,} tombstones' hashes deleted",
            rest_after / 1e6,
            "MB",
            rest_before / 1e6,
            "the same before the soak",
            LINEAR_TARGET,
            better="lower",
        ),
        Figure(
            f"soak: memory per tombstone over {n} jobs", per_tombstone, "B", None,
            "used_memory freed by deleting their hashes", TOMBSTONE_TARGET, "value", "lower",
        ),
        Figure(
            f"soak: whole rows left after {n} jobs", float(after["whole"]), "rows", None,
            "every finished row trimmed: 0",
        ),
    ]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument("--soak-jobs", type=int, default=20_000 if quick else JOBS)


def bench_part(args: argparse.Namespace) -> Part:
    result = soak(args.soak_jobs)
    return Part(figures(result), info=result)


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        _worker_main(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    add_arguments(parser, quick="--quick" in sys.argv)
    part = bench_part(parser.parse_args())
    print(table(part.figures))
    for point in part.info["checkpoints"]:
        print(point)


if __name__ == "__main__":
    main()
