"""``GET /metrics``: the Prometheus text format, read from Redis on each scrape and written by
``prometheus_client`` (a custom collector over one snapshot, so the text is the library's own).

Every figure comes from state the scripts keep (counters move inside the scripts, so they agree with the
queue), so any number of hosts report the same values:

* the queue's metrics, written by :func:`echomq.metrics.families` with the label ``bus`` (the game's tag):
  ``echomq_jobs_total{bus,event}`` (admitted, duplicate, claimed, completed, stale, reclaimed, dead, ...:
  :data:`echomq.states.COUNTERS`), ``echomq_jobs{bus,state}``, ``echomq_lanes_waiting``,
  ``echomq_fairness_lag_max``, ``echomq_lane_depth_max`` (the deepest of the first :data:`LANES_SHOWN` lanes
  of the ring), ``echomq_up``. A lane is a player id, and the scrape is public: no label names a lane;
* ``codemojex_submit_to_scored_seconds``: the histogram ``score.lua`` keeps (:mod:`codemojex.latency`),
  each guess observed once; ``codemojex_guesses_scored_total``; ``codemojex_players``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from codemojex.game import translate_errors
from codemojex.latency import Histogram, merge_latency, read_latency
from codemojex.web.host import host_of
from codemojex.web.problems import answers
from echomq.metrics import BusSample, families
from echomq.stats import Stats

router = APIRouter()

LANES_SHOWN = 20


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: hashed by identity, as a registry needs
class Snapshot(Collector):
    """What one scrape read from Redis, as metric families."""

    tag: str
    stats: Stats
    latency: Histogram
    players: int

    def collect(self) -> Iterator[Metric]:
        yield from families([BusSample(self.tag, self.stats)])  # echomq's own, labelled bus=<tag>
        latency = self.latency
        buckets = [(repr(bound / 1000), count) for bound, count in latency.cumulative]
        yield HistogramMetricFamily(
            "codemojex_submit_to_scored_seconds",
            "From admission to the scored record, on the Redis clock.",
            buckets=[*buckets, ("+Inf", latency.count)],
            sum_value=latency.sum_ms / 1000,
        )
        yield CounterMetricFamily(
            "codemojex_guesses_scored", "Guesses scored (each once in effect).", value=latency.count
        )
        yield GaugeMetricFamily("codemojex_players", "Registered players.", value=self.players)


@router.get(
    "/metrics",
    response_class=Response,
    tags=["metrics"],
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}, **answers()},
)
async def metrics(request: Request) -> Response:
    host = host_of(request)
    bus = host.game.bus if host.spread is None else host.spread.pbus  # a spread game's: every partition's
    with translate_errors():
        stats = await bus.stats(lanes=LANES_SHOWN)
        players = sum([await game.redis.zcard(game.keys.players) for game in host.games])
    latency = merge_latency([await read_latency(game) for game in host.games])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Snapshot(bus.tag, stats, latency, int(players)))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
