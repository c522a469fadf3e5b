"""Read-only views for dashboards and the CLI: counters, depth per state, lanes and fairness lag.

Counters are incremented inside the scripts, so they agree with the state they describe. The *fairness
lag* of a lane is the number of claims served (on the whole bus) since the lane was last served, or
since it became non-empty if it was not served since: with the ring rotation it stays below the number
of lanes waiting, however deep any one lane is (see claim.lua for how the scripts keep it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from echomq._validate import check_int
from echomq.errors import translate_redis_errors
from echomq.states import COUNTERS

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.keyspace import Keyspace


@dataclass(frozen=True, slots=True)
class LaneStats:
    lane: str
    depth: int
    lag: int  # claims served since this lane was last served (or became non-empty)


@dataclass(frozen=True, slots=True)
class Stats:
    counters: dict[str, int]
    queued: int
    delayed: int
    active: int
    done: int
    dead: int
    lanes: list[LaneStats] = field(default_factory=list)
    lanes_total: int = 0
    lag_max: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "counters": self.counters,
            "depth": {
                "queued": self.queued,
                "delayed": self.delayed,
                "active": self.active,
                "done": self.done,
                "dead": self.dead,
            },
            "lanes_total": self.lanes_total,
            "lanes": [{"lane": s.lane, "depth": s.depth, "lag": s.lag} for s in self.lanes],
            "lag_max": self.lag_max,
        }


async def read_stats(bus: BusCore, *, lanes: int = 50) -> Stats:
    """Counters, depths and the first ``lanes`` lanes of the ring with their depth and lag.

    Read only: a lost reply changes nothing and the retry reads afresh."""
    keys, args = stats_call(bus.keys, lanes)
    with translate_redis_errors():
        reply = await bus.scripts.run("stats", keys, args)
    return stats_from_reply(reply)


def stats_call(keys: Keyspace, lanes: int) -> tuple[list[str], list[Any]]:
    """Keys and args of one stats.lua call (shared by both buses)."""
    check_int("lanes", lanes, 0, 10_000)
    return (
        [keys.stats, keys.ring, keys.delayed, keys.active, keys.done, keys.dead, keys.waiting],
        [keys.prefix, lanes],
    )


def stats_from_reply(reply: Any) -> Stats:
    """The :class:`Stats` a stats.lua reply reports."""
    flat, queued, delayed, active, done, dead, lanes_total, detail = reply
    raw = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
    return Stats(
        counters={name: raw.get(name, 0) for name in COUNTERS},
        queued=int(queued),
        delayed=int(delayed),
        active=int(active),
        done=int(done),
        dead=int(dead),
        lanes=[
            LaneStats(detail[i].decode(), int(detail[i + 1]), int(detail[i + 2]))
            for i in range(0, len(detail), 3)
        ],
        lanes_total=int(lanes_total),
        lag_max=raw.get("lag_max", 0),
    )
