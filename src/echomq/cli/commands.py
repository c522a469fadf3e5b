"""The ``echomq`` command: run a worker, read stats, inspect jobs, handle dead letters, sweep, demo.

``REDIS_URL`` selects the server (default ``redis://127.0.0.1:6379/0``; ``echomq demo`` starts an
embedded Redis instead when it is unset); with ``--cluster`` it names one node of a Redis Cluster, from
which the client discovers the others. ``--tag`` selects the bus (default ``cm``). Bad input (an
ill-formed job id, a bad ``MODULE:FUNC``) exits with 2 and one line on stderr; a job that does not exist,
or a server that cannot be reached, exits with 1. No error ends in a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import importlib
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Coroutine
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

import redis.exceptions

from echomq import ids
from echomq.bus import Bus
from echomq.core import DEFAULT_TAG
from echomq.errors import EchoMQError, InvalidInput, UnknownJob
from echomq.jobs import JobInfo
from echomq.keyspace import JOB_BRAND
from echomq.worker import logs
from echomq.worker.runner import SWEEP_PERIOD_S, Worker

DEFAULT_URL = "redis://127.0.0.1:6379/0"
EXIT_FAILURE = 1  # a job not found, not dead, or Redis unreachable
EXIT_USAGE = 2  # ill-formed input, as argparse uses
_CLUSTER_HELP = "REDIS_URL names one node of a Redis Cluster"


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def redis_url() -> str:
    return os.environ.get("REDIS_URL") or DEFAULT_URL


def shown_url(url: str) -> str:
    """``url`` without its password, for error messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _bytes_json(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"size": len(data), "text": text, "base64": base64.b64encode(data).decode()}


def _job_json(info: JobInfo) -> dict[str, Any]:
    out = asdict(info)
    out["state"] = info.state.value
    out["payload"] = _bytes_json(info.payload)
    out["result"] = _bytes_json(info.result)
    return out


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def _job_arg(text: str) -> str:
    """An argparse type: a well-formed JOB id, else exit 2 with the reason."""
    try:
        return ids.check(text, JOB_BRAND)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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


def _bus(args: argparse.Namespace) -> Bus:
    """The bus of ``--tag`` on ``REDIS_URL`` (a cluster client with ``--cluster``)."""
    return Bus.from_url(redis_url(), tag=args.tag, cluster=args.cluster)


async def _worker(args: argparse.Namespace) -> int:
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


async def _stats(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        stats = await bus.stats(lanes=args.lanes)
    if args.json:
        _print_json({"tag": args.tag, **stats.as_dict()})
        return 0
    depth = stats.as_dict()["depth"]
    assert isinstance(depth, dict)
    print(f"bus {args.tag}: " + "  ".join(f"{name}={count}" for name, count in depth.items()))
    print("counters: " + "  ".join(f"{name}={count}" for name, count in stats.counters.items()))
    print(f"lanes: {stats.lanes_total} waiting, fairness lag max {stats.lag_max}")
    for lane in stats.lanes:
        print(f"  {lane.lane}  depth={lane.depth}  lag={lane.lag}")
    return 0


async def _inspect(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        info = await bus.inspect(args.job)
    data = _job_json(info)
    if args.json:
        _print_json(data)
        return 0
    for key in ("job", "state", "lane", "location", "attempts", "tries", "max_attempts", "owner", "error"):
        print(f"{key:>12}: {data[key]}")
    for key in ("created_ms", "deadline_ms", "finished_ms", "late_ms"):
        if data[key] is not None:
            print(f"{key:>12}: {data[key]}")
    for key in ("payload", "result"):
        if data[key] is not None:
            shown = data[key]["text"] if data[key]["text"] is not None else "base64:" + data[key]["base64"]
            print(f"{key:>12}: {shown[:200]}")
    return 0


async def _dead_list(args: argparse.Namespace) -> int:
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
        _print_json(rows)
    elif not rows:
        print(f"no dead jobs on bus {args.tag}")
    else:
        for row in rows:
            print(f"{row['job']}  lane={row['lane']}  tries={row['tries']}  error={row['error']}")
    return 0


async def _dead_retry(args: argparse.Namespace) -> int:
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


async def _sweep(args: argparse.Namespace) -> int:
    async with _bus(args) as bus:
        report = await bus.sweep()
    if args.json:
        _print_json(asdict(report))
    else:
        print(
            f"promoted={report.promoted} reclaimed={report.reclaimed} dead={report.dead} "
            f"trimmed={report.trimmed} next_due_ms={report.next_due_ms}"
        )
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from echomq.cli import demo  # noqa: PLC0415  (the demo pulls in the embedded server only when asked)

    return await demo.run(
        tag=args.tag, seconds=args.seconds, lanes=args.lanes, rate=args.rate, cluster=args.cluster
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="echomq", description="EchoMQ: a reliable job queue on Redis.")
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"bus tag (default {DEFAULT_TAG})")
    parser.add_argument("--cluster", action="store_true", help=_CLUSTER_HELP)
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )
    common = _Parser(add_help=False)
    common.add_argument("--tag", default=argparse.SUPPRESS, help=f"bus tag (default {DEFAULT_TAG})")
    common.add_argument("--cluster", action="store_true", default=argparse.SUPPRESS, help=_CLUSTER_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = sub.add_parser("worker", parents=[common], help="run a worker on MODULE:FUNC")
    worker.add_argument("handler", metavar="MODULE:FUNC")
    worker.add_argument("--concurrency", type=int, default=10)
    worker.add_argument("--lease-ms", type=int, default=30_000)
    worker.add_argument("--sweep-every", type=float, default=SWEEP_PERIOD_S, metavar="SECONDS")
    worker.add_argument("--grace", type=float, default=10.0, metavar="SECONDS")
    worker.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="per-job timeout")
    worker.set_defaults(run=_worker)

    stats = sub.add_parser("stats", parents=[common], help="counters, depths and lanes")
    stats.add_argument("--json", action="store_true")
    stats.add_argument("--lanes", type=int, default=20, help="lanes to detail")
    stats.set_defaults(run=_stats)

    inspect = sub.add_parser("inspect", parents=[common], help="one job's row and location")
    inspect.add_argument("job", type=_job_arg, metavar="JOB")
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(run=_inspect)

    dead = sub.add_parser("dead", help="dead-lettered jobs").add_subparsers(dest="dead", required=True)
    dead_list = dead.add_parser("list", parents=[common], help="the oldest dead jobs")
    dead_list.add_argument("--json", action="store_true")
    dead_list.add_argument("--limit", type=int, default=100)
    dead_list.set_defaults(run=_dead_list)
    dead_retry = dead.add_parser("retry", parents=[common], help="return dead jobs to their lanes")
    which = dead_retry.add_mutually_exclusive_group(required=True)
    which.add_argument("job", nargs="?", type=_job_arg, metavar="JOB")
    which.add_argument("--all", action="store_true")
    dead_retry.set_defaults(run=_dead_retry)

    sweep = sub.add_parser("sweep", parents=[common], help="run one sweep now")
    sweep.add_argument("--json", action="store_true")
    sweep.set_defaults(run=_sweep)

    demo = sub.add_parser("demo", parents=[common], help="a producer and a worker, with live counts")
    demo.add_argument("--seconds", type=float, default=None, help="stop by itself after this long")
    demo.add_argument("--lanes", type=int, default=20)
    demo.add_argument("--rate", type=float, default=200.0, help="jobs per second")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``echomq``; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level)
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except (
        UsageError,
        EchoMQError,
        ValueError,
        redis.exceptions.RedisError,
        redis.exceptions.RedisClusterException,
    ) as exc:
        code, message = explain(exc)
        print(message, file=sys.stderr)
        return code


def explain(exc: Exception) -> tuple[int, str]:
    """The exit code and the one-line message for an error that ends a command."""
    if isinstance(exc, UnknownJob):
        return EXIT_FAILURE, f"echomq: {exc}"
    if isinstance(exc, UsageError | InvalidInput):
        return EXIT_USAGE, f"echomq: error: {exc}"
    if isinstance(exc, EchoMQError):
        return EXIT_FAILURE, f"echomq: {type(exc).__name__}: {exc} (server {shown_url(redis_url())})"
    unreachable = (  # a cluster client that reached no node raises a RedisClusterException
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.RedisClusterException,
    )
    if isinstance(exc, unreachable):
        return EXIT_FAILURE, f"echomq: RedisUnavailable: {exc} (server {shown_url(redis_url())})"
    if isinstance(exc, redis.exceptions.RedisError):  # a call the bus does not translate (dead_jobs)
        return EXIT_FAILURE, f"echomq: {type(exc).__name__}: {exc} (server {shown_url(redis_url())})"
    return EXIT_USAGE, f"echomq: error: {exc}"  # a ValueError: e.g. a REDIS_URL redis-py cannot parse
