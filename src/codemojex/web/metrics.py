"""``GET /metrics``: the Prometheus text format (version 0.0.4), read from Redis on each scrape.

Every figure comes from state the scripts keep (counters move inside the scripts, so they agree with the
queue), so any number of hosts report the same values:

* ``echomq_jobs_total{event}``: admitted, duplicate, claimed, completed, stale (finishes refused), reclaimed
  (expired leases swept back), dead (dead-lettered), and the rest of :data:`echomq.states.COUNTERS`;
* ``echomq_jobs{state}``: queue depth per state; ``echomq_lanes_waiting``; ``echomq_fairness_lag_max`` (the
  highest lag a claim has seen); ``echomq_lane_depth_max``, the deepest of the first :data:`LANES_SHOWN`
  lanes of the ring. A lane is a player id, and the scrape is public: no label names a lane;
* ``codemojex_submit_to_scored_seconds``: the histogram ``score.lua`` keeps (:mod:`codemojex.latency`),
  each guess observed once; ``codemojex_guesses_scored_total``; ``codemojex_players``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from codemojex.game import translate_errors
from codemojex.latency import read_latency
from codemojex.web.host import host_of
from codemojex.web.problems import answers

router = APIRouter()

LANES_SHOWN = 20
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _seconds(ms: float) -> str:
    return repr(ms / 1000)


@router.get("/metrics", response_class=PlainTextResponse, tags=["metrics"], responses=answers())
async def metrics(request: Request) -> PlainTextResponse:
    game = host_of(request).game
    with translate_errors():
        stats = await game.bus.stats(lanes=LANES_SHOWN)
        players = await game.redis.zcard(game.keys.players)
    latency = await read_latency(game)
    lines: list[str] = []
    _family(lines, "echomq_jobs_total", "counter", "Queue events, counted inside the Lua scripts.")
    lines += [f'echomq_jobs_total{{event="{name}"}} {value}' for name, value in stats.counters.items()]
    _family(lines, "echomq_jobs", "gauge", "Jobs in each state now.")
    depth = {"queued": stats.queued, "delayed": stats.delayed, "active": stats.active}
    depth |= {"done": stats.done, "dead": stats.dead}
    lines += [f'echomq_jobs{{state="{state}"}} {value}' for state, value in depth.items()]
    _family(lines, "echomq_lanes_waiting", "gauge", "Lanes holding at least one queued job.")
    lines.append(f"echomq_lanes_waiting {stats.lanes_total}")
    _family(lines, "echomq_fairness_lag_max", "gauge", "The highest fairness lag a claim has observed.")
    lines.append(f"echomq_fairness_lag_max {stats.lag_max}")
    _family(
        lines, "echomq_lane_depth_max", "gauge", f"The deepest of the first {LANES_SHOWN} lanes of the ring."
    )
    lines.append(f"echomq_lane_depth_max {max((lane.depth for lane in stats.lanes), default=0)}")
    name = "codemojex_submit_to_scored_seconds"
    _family(lines, name, "histogram", "From admission to the scored record, on the Redis clock.")
    lines += [f'{name}_bucket{{le="{_seconds(bound)}"}} {count}' for bound, count in latency.cumulative]
    lines.append(f'{name}_bucket{{le="+Inf"}} {latency.count}')
    lines.append(f"{name}_sum {_seconds(latency.sum_ms)}")
    lines.append(f"{name}_count {latency.count}")
    _family(lines, "codemojex_guesses_scored_total", "counter", "Guesses scored (each once in effect).")
    lines.append(f"codemojex_guesses_scored_total {latency.count}")
    _family(lines, "codemojex_players", "gauge", "Registered players.")
    lines.append(f"codemojex_players {int(players)}")
    return PlainTextResponse("\n".join(lines) + "\n", media_type=CONTENT_TYPE)
