"""The ``echomq`` command line: an argparse parser whose errors are one line (exit code 2), a JOB type that
rejects an ill-formed id before anything touches Redis, the global options (which may also follow a
command) and the sub-commands, each bound to its coroutine in :mod:`echomq.cli.commands`."""

from __future__ import annotations

import argparse
from typing import NoReturn

from echomq import ids
from echomq.cli import commands, control, serving
from echomq.cli.exits import EXIT_USAGE
from echomq.core import DEFAULT_TAG
from echomq.errors import InvalidInput
from echomq.keyspace import JOB_BRAND
from echomq.partitions import MAX_PARTITIONS
from echomq.schedules import DEFAULT_CATCH_UP_MS, DEFAULT_MAX_CATCH_UP
from echomq.worker.runner import SWEEP_PERIOD_S

_CLUSTER_HELP = "the URL names one node of a Redis Cluster"
_PARTITIONS_HELP = "a partitioned bus over tags <tag>.0 ... <tag>.<P-1> (default: one bus, the tag itself)"
_URL_HELP = "the Redis server (default $REDIS_URL, else redis://127.0.0.1:6379/0)"


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _job_arg(text: str) -> str:
    """An argparse type: a well-formed JOB id, else exit 2 with the reason."""
    try:
        return ids.check(text, JOB_BRAND)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _partitions(text: str) -> int:
    """An argparse type: a partition count 1..MAX_PARTITIONS."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a partition count is a whole number, got {text!r}") from None
    if not 1 <= count <= MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(f"a partition count is 1 to {MAX_PARTITIONS}, got {count}")
    return count


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line."""
    parser = _Parser(prog="echomq", description="EchoMQ: a reliable job queue on Redis.")
    parser.add_argument("--tag", default=DEFAULT_TAG, help=f"bus tag (default {DEFAULT_TAG})")
    parser.add_argument("--cluster", action="store_true", help=_CLUSTER_HELP)
    parser.add_argument("--partitions", type=_partitions, default=0, metavar="P", help=_PARTITIONS_HELP)
    parser.add_argument("--redis-url", default=None, metavar="URL", help=_URL_HELP)
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )
    common = _Parser(add_help=False)
    common.add_argument("--tag", default=argparse.SUPPRESS, help=f"bus tag (default {DEFAULT_TAG})")
    common.add_argument("--cluster", action="store_true", default=argparse.SUPPRESS, help=_CLUSTER_HELP)
    common.add_argument(
        "--partitions", type=_partitions, default=argparse.SUPPRESS, metavar="P", help=_PARTITIONS_HELP
    )
    common.add_argument("--redis-url", default=argparse.SUPPRESS, metavar="URL", help=_URL_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    worker = sub.add_parser("worker", parents=[common], help="run a worker on MODULE:FUNC")
    worker.add_argument("handler", metavar="MODULE:FUNC")
    worker.add_argument("--concurrency", type=int, default=10)
    worker.add_argument("--lease-ms", type=int, default=30_000)
    worker.add_argument("--sweep-every", type=float, default=SWEEP_PERIOD_S, metavar="SECONDS")
    worker.add_argument("--grace", type=float, default=10.0, metavar="SECONDS")
    worker.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="per-job timeout")
    worker.set_defaults(run=commands.run_worker)

    stats = sub.add_parser("stats", parents=[common], help="counters, depths and lanes")
    stats.add_argument("--json", action="store_true")
    stats.add_argument("--lanes", type=int, default=20, help="lanes to detail")
    stats.set_defaults(run=commands.show_stats)

    inspect = sub.add_parser("inspect", parents=[common], help="one job's row and location")
    inspect.add_argument("job", type=_job_arg, metavar="JOB")
    inspect.add_argument("--json", action="store_true")
    inspect.set_defaults(run=commands.inspect_job)

    dead = sub.add_parser("dead", help="dead-lettered jobs").add_subparsers(dest="dead", required=True)
    dead_list = dead.add_parser("list", parents=[common], help="the oldest dead jobs")
    dead_list.add_argument("--json", action="store_true")
    dead_list.add_argument("--limit", type=int, default=100)
    dead_list.set_defaults(run=commands.list_dead)
    dead_retry = dead.add_parser("retry", parents=[common], help="return dead jobs to their lanes")
    which = dead_retry.add_mutually_exclusive_group(required=True)
    which.add_argument("job", nargs="?", type=_job_arg, metavar="JOB")
    which.add_argument("--all", action="store_true")
    dead_retry.set_defaults(run=commands.retry_dead)
    dead_delete = dead.add_parser(
        "delete", parents=[common], help="delete dead jobs for good (their ids still absorb duplicates)"
    )
    which = dead_delete.add_mutually_exclusive_group(required=True)
    which.add_argument("job", nargs="?", type=_job_arg, metavar="JOB")
    which.add_argument("--all", action="store_true")
    dead_delete.set_defaults(run=commands.delete_dead)

    sweep = sub.add_parser("sweep", parents=[common], help="run one sweep now")
    sweep.add_argument("--json", action="store_true")
    sweep.set_defaults(run=commands.sweep_once)

    schedule = sub.add_parser(
        "schedule", parents=[common], help="enqueue a periodic job's ticks (run several: each tick once)"
    )
    schedule.add_argument("name", metavar="NAME", help="the schedule's name (part of its tick ids)")
    schedule.add_argument(
        "when", metavar="WHEN", help="a cron expression ('*/5 * * * *', '@daily') or '@every 30s'"
    )
    schedule.add_argument("--lane", required=True, help="the lane each tick's job is enqueued on")
    schedule.add_argument("--payload", default="", help="each tick's payload, as UTF-8 text (default empty)")
    schedule.add_argument("--max-attempts", type=int, default=5)
    schedule.add_argument("--priority", type=int, default=0)
    schedule.add_argument(
        "--catch-up-ms", type=int, default=DEFAULT_CATCH_UP_MS, help="how far back missed ticks are enqueued"
    )
    schedule.add_argument(
        "--max-catch-up", type=int, default=DEFAULT_MAX_CATCH_UP, help="at most this many ticks a step"
    )
    schedule.add_argument("--once", action="store_true", help="one step: print its ticks and exit")
    schedule.set_defaults(run=commands.run_schedule)

    control.add_commands(sub, common, _job_arg)

    exporter = sub.add_parser(
        "metrics", parents=[common], help="serve /metrics for Prometheus (needs echomq[metrics])"
    )
    exporter.add_argument("--port", type=int, required=True, help="the port to listen on (0: any free one)")
    exporter.add_argument("--addr", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    exporter.add_argument(
        "--bus", action="append", metavar="TAG", help="a bus to report (repeat for several; default --tag)"
    )
    exporter.add_argument("--lanes", type=int, default=20, help="lanes of the ring read per bus (default 20)")
    exporter.add_argument(
        "--lane-labels", action="store_true", help="also report each lane read, labelled with its name"
    )
    exporter.set_defaults(run=serving.run_metrics)

    dashboard = sub.add_parser(
        "dashboard", parents=[common], help="serve the queue's web dashboard (needs echomq[dashboard])"
    )
    dashboard.add_argument("--port", type=int, required=True, help="the port to listen on (0: any free one)")
    dashboard.add_argument("--addr", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    dashboard.add_argument("--read-only", action="store_true", help="show the queue; refuse retry and delete")
    dashboard.add_argument(
        "--allowed-host",
        action="append",
        metavar="HOST",
        help="a Host header to accept besides the address served on and localhost (repeatable)",
    )
    dashboard.add_argument("--refresh", type=float, default=2.0, metavar="SECONDS", help="the page's refresh")
    dashboard.set_defaults(run=serving.run_dashboard)

    demo = sub.add_parser("demo", parents=[common], help="a producer and a worker, with live counts")
    demo.add_argument("--seconds", type=float, default=None, help="stop by itself after this long")
    demo.add_argument("--lanes", type=int, default=20)
    demo.add_argument("--rate", type=float, default=200.0, help="jobs per second")
    demo.set_defaults(run=commands.run_demo)
    return parser
