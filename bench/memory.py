"""The memory benchmark: Redis bytes per queued job and per finished job's tombstone.

Run alone with ``.venv/bin/python -m bench.memory`` (it starts its own redis-server, no AOF) or call
:func:`measure` with the URL of a server that holds nothing else the run could disturb. Each figure is
``used_memory`` after minus before, divided by the jobs, on a fresh bus (a tag of its own, its keys
deleted after): ``JOBS`` queued jobs over 1,000 lanes and over one lane, with a 100-byte and a 16-byte
payload, lanes named like the game's players (26-character PLR ids); and the tombstone a finished job
leaves once its result ttl passed (kept for the dedup window), measured after every done row was
trimmed. The server's configuration is never changed: the encodings are Redis's defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

import redis

from bench.report import Figure, Part, table
from echomq import Bus, NewJob, finish, ids, jobs, lanes, sweep
from echomq.core import Settings
from echomq.scripts import SyncScripts
from echomq.testing.server import RedisProcess

JOBS = 100_000
PIPELINE = 1000
QUEUED_TARGETS = {100: 450.0, 16: 300.0}  # bytes per queued job, by payload size
TOMBSTONE_TARGET = 120.0
BASELINE_100 = 1022.0  # bytes per queued job (100-byte payload) before the compact row (issue 14)


def used_memory(client: redis.Redis) -> int:
    """``used_memory`` once lazy frees have settled (UNLINK of a big key frees in the background)."""
    for _ in range(200):
        info = client.info("memory")
        if int(info.get("lazyfree_pending_objects", 0)) == 0:
            return int(info["used_memory"])
        time.sleep(0.01)
    return int(client.info("memory")["used_memory"])


def _drop(client: redis.Redis, bus: Bus) -> None:
    """Delete every key of ``bus`` (SCAN by its pattern): the next figure starts from the same memory."""
    batch: list[bytes] = []
    for key in client.scan_iter(match=bus.keys.pattern, count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            client.unlink(*batch)
            batch = []
    if batch:
        client.unlink(*batch)


def _fresh_bus(url: str, settings: Settings | None = None) -> Bus:
    return Bus.from_url(url, tag="mb", settings=settings)  # two characters, as the game's "cm"


def enqueue_all(client: redis.Redis, bus: Bus, specs: list[NewJob]) -> None:
    """enqueue.lua for each of ``specs``, pipelined; every one must be admitted."""
    scripts = SyncScripts(client)
    for i in range(0, len(specs), PIPELINE):
        pipe = client.pipeline(transaction=False)
        for spec in specs[i : i + PIPELINE]:
            scripts.run("enqueue", *jobs.enqueue_call(bus, spec), client=pipe)
        replies = pipe.execute()
        if any(int(reply[0]) != 1 for reply in replies):
            raise RuntimeError("an enqueue was not admitted: the bus was not fresh")


def queued_specs(count: int, lane_count: int, payload_bytes: int) -> list[NewJob]:
    lane_names = [ids.mint("PLR") for _ in range(lane_count)]
    payload = b"p" * payload_bytes
    return [NewJob(ids.mint("JOB"), lane_names[i % lane_count], payload) for i in range(count)]


@dataclass(frozen=True, slots=True)
class Sample:
    """Bytes of ``used_memory`` per job, and the encodings that explain it (OBJECT ENCODING)."""

    bytes_per_job: float
    encodings: dict[str, str]


def _encoding(client: redis.Redis, key: str) -> str:
    raw = client.object("encoding", key)
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def sample_queued(client: redis.Redis, url: str, count: int, lane_count: int, payload_bytes: int) -> Sample:
    """``count`` queued jobs over ``lane_count`` lanes: bytes per job, the row's and a lane's encoding."""
    bus = _fresh_bus(url)
    specs = queued_specs(count, lane_count, payload_bytes)
    before = used_memory(client)
    enqueue_all(client, bus, specs)
    after = used_memory(client)
    encodings = {
        "row": _encoding(client, bus.keys.job(specs[-1].job)),
        "lane": _encoding(client, bus.keys.lane(specs[-1].lane)),
    }
    _drop(client, bus)
    return Sample((after - before) / count, encodings)


def per_queued_job(client: redis.Redis, url: str, count: int, lane_count: int, payload_bytes: int) -> float:
    """Bytes of ``used_memory`` per queued job: ``count`` jobs over ``lane_count`` lanes."""
    return sample_queued(client, url, count, lane_count, payload_bytes).bytes_per_job


def sample_tombstones(client: redis.Redis, url: str, count: int, payload_bytes: int = 100) -> Sample:
    """Bytes per finished job once its row is trimmed to its tombstone (result ttl 0, dedup window 1 day):
    ``count`` jobs enqueued, claimed, completed, then swept until no done row is left whole; the encoding
    of the last job's tombstones' hash."""
    bus = _fresh_bus(url, Settings(result_ttl_ms=0))
    scripts = SyncScripts(client)
    specs = queued_specs(count, 1000, payload_bytes)
    before = used_memory(client)
    enqueue_all(client, bus, specs)
    claim_keys, claim_args = lanes.claim_call(bus, 500, 60_000, "")
    while True:
        claimed = lanes.claimed_from_reply(scripts.run("claim", claim_keys, claim_args), "")
        if not claimed.jobs:
            break
        pipe = client.pipeline(transaction=False)
        for claim in claimed.jobs:
            scripts.run("complete", *finish.complete_call(bus, claim, b"ok"), client=pipe)
        pipe.execute()
    sweep_keys, sweep_args = sweep.sweep_call(bus, limit=1000, lock_ms=0)
    while client.zcard(bus.keys.done):
        scripts.run("sweep", sweep_keys, sweep_args)
    after = used_memory(client)
    encodings = {"tombstones": _encoding(client, bus.keys.tombstone(specs[-1].job)[0])}
    _drop(client, bus)
    return Sample((after - before) / count, encodings)


def per_tombstone(client: redis.Redis, url: str, count: int, payload_bytes: int = 100) -> float:
    """Bytes per finished job's tombstone (see :func:`sample_tombstones`)."""
    return sample_tombstones(client, url, count, payload_bytes).bytes_per_job


def warm_up(client: redis.Redis, url: str) -> None:
    """One small run of every script first: loading the scripts, the Lua caches and the client's buffers
    take about 700 kB once, which is no job's cost and would otherwise land on the first figure."""
    sample_tombstones(client, url, 2000)


def measure(url: str, count: int = JOBS) -> list[Figure]:
    """The memory figures on the server at ``url`` (which must hold nothing that a run could disturb)."""
    client = redis.Redis.from_url(url)
    figures = []
    try:
        warm_up(client, url)
        for payload_bytes in (100, 16):
            for lane_count in (1000, 1):
                value = per_queued_job(client, url, count, lane_count, payload_bytes)
                lanes_text = "1,000 lanes" if lane_count == 1000 else "one lane"
                figures.append(
                    Figure(
                        f"memory per queued job, {payload_bytes}-byte payload, {lanes_text}",
                        round(value, 1),
                        "B",
                        BASELINE_100 if payload_bytes == 100 else None,
                        "before the compact row" if payload_bytes == 100 else "",
                        QUEUED_TARGETS[payload_bytes],
                        on="value",
                        better="lower",
                    )
                )
        tomb = per_tombstone(client, url, min(count, 20_000))
        figures.append(
            Figure(
                "memory per finished job's tombstone",
                round(tomb, 1),
                "B",
                None,
                "",
                TOMBSTONE_TARGET,
                "value",
                "lower",
            )
        )
    finally:
        client.close()
    return figures


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument(
        "--memory-jobs", type=int, default=10_000 if quick else JOBS, help="queued per figure"
    )


def bench_part(args: argparse.Namespace) -> Part:
    with RedisProcess(appendonly=False) as server:
        return Part(measure(server.url, args.memory_jobs), info={"jobs": args.memory_jobs})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", help="a Redis server holding nothing else (default: start one)")
    parser.add_argument("--jobs", type=int, default=JOBS)
    options = parser.parse_args()
    if options.url:
        print(table(measure(options.url, options.jobs)))
        return
    with RedisProcess(appendonly=False) as server:
        print(table(measure(server.url, options.jobs)))


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
