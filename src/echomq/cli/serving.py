"""The ``echomq`` sub-commands that serve HTTP until SIGINT or SIGTERM: ``metrics`` (the Prometheus
exporter, :mod:`echomq.metrics`, extra ``echomq[metrics]``) and ``dashboard`` (the queue's web page,
:mod:`echomq.dashboard`, extra ``echomq[dashboard]``). Each checks its options and its extra before it
reaches Redis, and prints the URL it serves on one line."""

from __future__ import annotations

import argparse
import asyncio
import signal
from contextlib import ExitStack

from echomq import metrics
from echomq.bus import Bus
from echomq.cli.env import redis_url
from echomq.errors import require_extra
from echomq.partition_layout import partition_tags
from echomq.partitions import AnyBus, PartitionedBus
from echomq.sync import SyncBus


async def _until_signalled() -> None:
    """Wait for SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _tags(args: argparse.Namespace) -> list[str]:
    """The buses to serve: each ``--bus``, else the global ``--tag``."""
    return list(dict.fromkeys(args.bus or [args.tag]))


async def run_metrics(args: argparse.Namespace) -> int:
    """``echomq metrics --port N``: serve ``/metrics`` of every bus named, read at each scrape."""
    require_extra("metrics", "prometheus_client")
    with ExitStack() as stack:
        readers: dict[str, metrics.Reader] = {}
        for tag in _tags(args):
            if args.partitions:
                parts = [
                    stack.enter_context(SyncBus.from_url(redis_url(), t, cluster=args.cluster))
                    for t in partition_tags(tag, args.partitions)
                ]
                readers[tag] = metrics.partitioned_reader(parts, args.lanes)
            else:
                bus = stack.enter_context(SyncBus.from_url(redis_url(), tag, cluster=args.cluster))
                readers[tag] = metrics.sync_reader(bus, args.lanes)
        collector = metrics.StatsCollector(readers, lane_labels=args.lane_labels)
        server = metrics.serve(collector, port=args.port, addr=args.addr)
        try:
            print(f"serving http://{args.addr}:{server.server_port}/metrics", flush=True)
            await _until_signalled()
        finally:
            server.shutdown()
            server.server_close()
    return 0


def _any_bus(args: argparse.Namespace) -> AnyBus:
    if args.partitions:
        return PartitionedBus.from_url(
            redis_url(), tag=args.tag, partitions=args.partitions, cluster=args.cluster
        )
    return Bus.from_url(redis_url(), tag=args.tag, cluster=args.cluster)


async def run_dashboard(args: argparse.Namespace) -> int:
    """``echomq dashboard --port N``: serve the queue's page until SIGINT or SIGTERM."""
    for module in ("starlette", "uvicorn", "jinja2"):
        require_extra("dashboard", module)
    from echomq.dashboard.serve import serve  # noqa: PLC0415 (the extra, checked above)

    async with _any_bus(args) as bus:
        await serve(
            bus,
            host=args.addr,
            port=args.port,
            read_only=args.read_only,
            allowed_hosts=args.allowed_host or (),
            refresh_s=args.refresh,
        )
    return 0
