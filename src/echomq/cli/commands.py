"""The bodies of the ``echomq`` sub-commands: each a coroutine of the parsed arguments that returns the
exit code (:mod:`echomq.cli.parser` binds them; :mod:`echomq.cli.render` makes what they print)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from echomq._validate import check_utf8
from echomq.bus import Bus
from echomq.cli import render
from echomq.cli.env import redis_url
from echomq.cli.exits import EXIT_FAILURE, UsageError
from echomq.errors import InvalidPayload
from echomq.inspection import JobInfo
from echomq.partitions import AnyBus, PartitionedBus
from echomq.periodic import Scheduler
from echomq.schedules import Schedule
from echomq.states import Deletion
from echomq.worker.runner import Worker


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``MODULE:FUNC`` (FUNC may be dotted) from the current directory or the path."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"handler must be MODULE:FUNC, got {spec!r}")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # like `python -m`: handlers next to the caller are importable
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import module {module_name!r}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (any error while importing user code is a usage error here)
        raise UsageError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not callable(target):
        raise UsageError(f"{spec} is not callable")
    return target  # type: ignore[no-any-return]


def _bus(args: argparse.Namespace) -> AnyBus:
    """The bus of ``--tag`` on ``REDIS_URL`` (a cluster client with ``--cluster``); with ``--partitions P``
    the partitioned bus over ``<tag>.0`` ... ``<tag>.<P-1>`` (:mod:`echomq.partitions`)."""
    if args.partitions:
        return PartitionedBus.from_url(
            redis_url(), tag=args.tag, partitions=args.partitions, cluster=args.cluster
        )
    return Bus.from_url(redis_url(), tag=args.tag, cluster=args.cluster)


async def run_worker(args: argparse.Namespace) -> int:
    handler = load_handler(args.handler)
    async with _bus(args) as bus:
        worker = Worker(
            bus,
            handler,
            concurrency=args.concurrency,
            lease_ms=args.lease_ms,
            job_timeout_s=args.timeout,
            sweep_every_s=args.sweep_every,
            grace_s=args.grace,
        )
        await worker.run(handle_signals=True)
    return 0


async def show_stats(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        stats = await bus.stats(lanes=args.lanes)
    if args.json:
        render.print_json({"tag": args.tag, **stats.as_dict()})
    else:
        print(render.stats_text(args.tag, stats))
    return 0


async def inspect_job(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        info = await bus.inspect(args.job)
    data = render.job_json(info)
    if args.json:
        render.print_json(data)
    else:
        print(render.job_text(data))
    return 0


async def list_dead(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        dead = await bus.dead_jobs(limit=args.limit)
        infos = await asyncio.gather(*(bus.inspect(job) for job, _ in dead), return_exceptions=True)
    rows = []
    for (job, at_ms), info in zip(dead, infos, strict=True):
        row: dict[str, Any] = {"job": job, "dead_ms": at_ms, "lane": None, "tries": None, "error": None}
        if isinstance(info, JobInfo):  # else trimmed or moved since the listing
            row.update(lane=info.lane, tries=info.tries, error=info.error)
        rows.append(row)
    if args.json:
        render.print_json(rows)
    else:
        print(render.dead_text(args.tag, rows))
    return 0


async def retry_dead(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        if not args.all:
            if await bus.retry_dead(args.job):
                print(f"{args.job} is back in its lane")
                return 0
            info = await bus.inspect(args.job)
            print(f"echomq: {args.job} is not dead (state {info.state.value})", file=sys.stderr)
            return EXIT_FAILURE
        report = await bus.retry_all_dead()
    # Exactly the jobs this run moved: each dead job of the snapshot once, even if a worker dead-letters
    # it again meanwhile (see echomq.dead).
    line = f"{len(report.moved)} dead jobs back in their lanes"
    if report.listed != len(report.moved):
        line += f" ({report.listed - len(report.moved)} of the {report.listed} listed had left the dead set)"
    print(line)
    return 0


async def delete_dead(args: argparse.Namespace) -> int:
    """``echomq dead delete JOB`` (or ``--all``): a lost reply's retry answers "deleted already"."""
    async with _bus(args) as bus:
        if not args.all:
            outcome = await bus.delete_dead(args.job)
            if outcome is Deletion.DELETED:
                print(f"{args.job} deleted")
                return 0
            if outcome is Deletion.ALREADY:
                print(f"{args.job} was deleted already")
                return 0
            info = await bus.inspect(args.job)
            print(f"echomq: {args.job} is not dead (state {info.state.value})", file=sys.stderr)
            return EXIT_FAILURE
        report = await bus.delete_all_dead()
    line = f"{len(report.deleted)} dead jobs deleted"
    if report.listed != len(report.deleted):
        line += (
            f" ({report.listed - len(report.deleted)} of the {report.listed} listed had left the dead set)"
        )
    print(line)
    return 0


async def sweep_once(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        report = await bus.sweep()
    if args.json:
        render.print_json(asdict(report))
    else:
        print(render.sweep_text(report))
    return 0


async def run_demo(args: argparse.Namespace) -> int:
    from echomq.cli import demo  # noqa: PLC0415  (the demo pulls in the embedded server only when asked)

    return await demo.run(
        tag=args.tag, seconds=args.seconds, lanes=args.lanes, rate=args.rate, cluster=args.cluster
    )


async def run_schedule(args: argparse.Namespace) -> int:
    """One schedule's scheduler (``echomq schedule``) until SIGINT or SIGTERM, or one step with ``--once``.
    The schedule and the options are checked before Redis is reached; run it on as many hosts as you like:
    every tick is enqueued once (:mod:`echomq.periodic`)."""
    payload = check_utf8("payload", args.payload, InvalidPayload).encode()
    schedule = Schedule(
        name=args.name,
        cron=args.when,
        lane=args.lane,
        payload=payload,
        max_attempts=args.max_attempts,
        priority=args.priority,
    )
    async with _bus(args) as bus:
        scheduler = Scheduler(bus, [schedule], catch_up_ms=args.catch_up_ms, max_catch_up=args.max_catch_up)
        if args.once:
            report = await scheduler.tick_once()
            for tick in report.ticks:
                print(f"{tick.job} {tick.at_ms} {tick.admission.value}")
            return 0
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, scheduler.stop)
        try:
            await scheduler.run()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    return 0
