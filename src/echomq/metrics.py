"""Prometheus metrics of one or more buses, written by ``prometheus_client`` (``echomq[metrics]``).

Every figure is read from Redis at scrape time, from what the scripts keep (:mod:`echomq.stats`): the
counters move inside the scripts, so they agree with the queue, and any number of exporters of one bus
report the same values. Each metric carries the label ``bus`` (the bus's tag), so one exporter serves
several buses; a bus that could not be read answers ``echomq_up{bus} 0`` and nothing else, and the
others are still reported.

=====================================  =======  ==========================================================
metric                                 type     what
=====================================  =======  ==========================================================
``echomq_up{bus}``                     gauge    1 if the bus's stats were read in this scrape, else 0
``echomq_jobs_total{bus,event}``       counter  each of :data:`echomq.states.COUNTERS` (admitted, claimed,
                                                completed, retried, dead, deleted, ...)
``echomq_jobs{bus,state}``             gauge    jobs queued, delayed, active, done and dead now
``echomq_lanes_waiting{bus}``          gauge    lanes holding a queued job (in the ring)
``echomq_lane_depth_max{bus}``         gauge    the deepest of the lanes read (the ring's first ``lanes``)
``echomq_fairness_lag{bus}``           gauge    the highest fairness lag of the lanes read, now
``echomq_fairness_lag_max{bus}``       gauge    the highest fairness lag a claim has observed (ever)
``echomq_lane_depth{bus,lane}``        gauge    with ``lane_labels`` only: each lane read, its depth ...
``echomq_lane_lag{bus,lane}``          gauge    ... and its fairness lag
=====================================  =======  ==========================================================

A lane is often a user's id (codemojex's lanes are player ids): no label names a lane unless
``lane_labels`` is set, and then only the first ``lanes`` lanes of the ring, which rotates (a label set
that changes from scrape to scrape). Reading is read-only: a lost reply changes nothing.

:class:`StatsCollector` reads each bus at every scrape (a blocking reader, e.g. :func:`sync_reader`),
for the exporter :func:`serve` runs (``echomq metrics --port N``); an asyncio application reads the stats
itself (``await bus.stats()``) and renders them with :func:`latest` or yields :func:`families` from its
own collector (codemojex's ``/metrics`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from echomq._validate import check_int
from echomq.errors import EchoMQError, require_extra
from echomq.partition_layout import merge_stats
from echomq.stats import Stats

if TYPE_CHECKING:
    from prometheus_client.core import Metric
    from prometheus_client.registry import Collector

    from echomq.sync import SyncBus

log = logging.getLogger("echomq.metrics")

DEFAULT_LANES = 20  # lanes of the ring read per bus and scrape
Reader = Callable[[], Stats]


@dataclass(frozen=True, slots=True)
class BusSample:
    """One bus's stats as one scrape read them; ``stats`` None when it could not be read."""

    bus: str
    stats: Stats | None


def _require() -> None:
    require_extra("metrics", "prometheus_client")


def families(samples: Sequence[BusSample], *, lane_labels: bool = False) -> list[Metric]:
    """The metric families of ``samples`` (see the module doc), one family per metric, a sample per bus."""
    _require()
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: PLC0415 (extra)

    def gauge(name: str, text: str, extra: Sequence[str] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=["bus", *extra])

    up = gauge("echomq_up", "1 if the bus's stats were read in this scrape, else 0.")
    events = CounterMetricFamily(
        "echomq_jobs", "Queue events, counted inside the Lua scripts.", labels=["bus", "event"]
    )
    depth = gauge("echomq_jobs", "Jobs in each state now.", ["state"])
    waiting = gauge("echomq_lanes_waiting", "Lanes holding at least one queued job.")
    deepest = gauge("echomq_lane_depth_max", "The deepest of the lanes read (the first of the ring).")
    lag_now = gauge("echomq_fairness_lag", "The highest fairness lag of the lanes read, now.")
    lag_max = gauge("echomq_fairness_lag_max", "The highest fairness lag a claim has observed.")
    lane_depth = gauge("echomq_lane_depth", "Queued jobs of each lane read.", ["lane"])
    lane_lag = gauge("echomq_lane_lag", "Claims served since each lane read was last served.", ["lane"])
    for sample in samples:
        stats, bus = sample.stats, sample.bus
        up.add_metric([bus], 0 if stats is None else 1)
        if stats is None:
            continue
        for name, value in stats.counters.items():
            events.add_metric([bus, name], value)
        for state, value in (
            ("queued", stats.queued),
            ("delayed", stats.delayed),
            ("active", stats.active),
            ("done", stats.done),
            ("dead", stats.dead),
        ):
            depth.add_metric([bus, state], value)
        waiting.add_metric([bus], stats.lanes_total)
        deepest.add_metric([bus], max((lane.depth for lane in stats.lanes), default=0))
        lag_now.add_metric([bus], max((lane.lag for lane in stats.lanes), default=0))
        lag_max.add_metric([bus], stats.lag_max)
        if lane_labels:
            for lane in stats.lanes:
                lane_depth.add_metric([bus, lane.lane], lane.depth)
                lane_lag.add_metric([bus, lane.lane], lane.lag)
    found: list[Metric] = [up, events, depth, waiting, deepest, lag_now, lag_max]
    return [*found, lane_depth, lane_lag] if lane_labels else found


class Snapshot:
    """A collector of samples already read (an asyncio application reads them, then renders)."""

    def __init__(self, samples: Sequence[BusSample], *, lane_labels: bool = False) -> None:
        self.samples = list(samples)
        self.lane_labels = lane_labels

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples, lane_labels=self.lane_labels)


class StatsCollector:
    """A collector that reads every bus at each scrape: ``readers`` maps a bus's label to a blocking
    call that returns its :class:`~echomq.stats.Stats` (:func:`sync_reader`, :func:`partitioned_reader`).
    A reader that raises an :class:`~echomq.errors.EchoMQError` (Redis unreachable) reports
    ``echomq_up 0`` for its bus; the scrape still answers."""

    def __init__(self, readers: Mapping[str, Reader], *, lane_labels: bool = False) -> None:
        self.readers = dict(readers)
        self.lane_labels = lane_labels

    def samples(self) -> list[BusSample]:
        found = []
        for bus, read in self.readers.items():
            try:
                found.append(BusSample(bus, read()))
            except EchoMQError as exc:
                log.warning("metrics: bus %s could not be read: %s", bus, exc)
                found.append(BusSample(bus, None))
        return found

    def collect(self) -> Iterator[Metric]:
        yield from families(self.samples(), lane_labels=self.lane_labels)


def sync_reader(bus: SyncBus, lanes: int = DEFAULT_LANES) -> Reader:
    """A reader of ``bus``'s stats with its first ``lanes`` lanes."""
    check_int("lanes", lanes, 0, 10_000)
    return lambda: bus.stats(lanes=lanes)


def partitioned_reader(partitions: Sequence[SyncBus], lanes: int = DEFAULT_LANES) -> Reader:
    """A reader of a partitioned bus's stats (``<tag>.0`` ... ``<tag>.<P-1>``), merged as
    :meth:`echomq.PartitionedBus.stats` merges them: counters and depths summed, the deepest lanes."""
    check_int("lanes", lanes, 0, 10_000)
    return lambda: merge_stats([bus.stats(lanes=lanes) for bus in partitions], lanes)


def registry_of(collector: Snapshot | StatsCollector) -> Any:
    """A fresh ``CollectorRegistry`` holding only ``collector`` (none of the process's default metrics)."""
    _require()
    from prometheus_client import CollectorRegistry  # noqa: PLC0415 (optional extra)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(cast("Collector", collector))
    return registry


def latest(samples: Sequence[BusSample], *, lane_labels: bool = False) -> tuple[bytes, str]:
    """The exposition text of ``samples`` and its content type, for an application's own ``/metrics``."""
    _require()
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415 (optional extra)

    return generate_latest(registry_of(Snapshot(samples, lane_labels=lane_labels))), CONTENT_TYPE_LATEST


def serve(collector: StatsCollector, *, port: int, addr: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` of ``collector`` over HTTP on ``addr:port`` from a daemon thread (the server of
    prometheus_client); returns the server (``shutdown()`` stops it). Port 0 picks a free one
    (``server.server_port``)."""
    check_int("port", port, 0, 65_535)
    _require()
    from prometheus_client import start_http_server  # noqa: PLC0415 (optional extra)

    server, _thread = start_http_server(port, addr=addr, registry=registry_of(collector))
    return server
