"""Read-only views for dashboards and the CLI: counters, depth per state, lanes and fairness lag.

Counters are incremented inside the scripts, so they agree with the state they describe. The *fairness
lag* of a lane is the number of claims served (on the whole bus) since its head job became claimable:
with the ring rotation it stays below the number of lanes waiting, however deep any one lane is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from echomq.errors import translate_redis_errors
from echomq.states import COUNTERS

if TYPE_CHECKING:
    from echomq.bus import Bus


@dataclass(frozen=True, slots=True)
class LaneStats:
    lane: str
    depth: int
    lag: int  # claims served since this lane's head became claimable


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


async def read_stats(bus: Bus, *, lanes: int = 50) -> Stats:
    """Counters, depths and the first ``lanes`` lanes of the ring with their depth and lag."""
    keys = bus.keys
    with translate_redis_errors():
        pipe = bus.redis.pipeline(transaction=False)
        pipe.hgetall(keys.stats)
        pipe.zcard(keys.delayed)
        pipe.zcard(keys.active)
        pipe.zcard(keys.done)
        pipe.zcard(keys.dead)
        pipe.llen(keys.ring)
        pipe.lrange(keys.ring, 0, max(0, lanes - 1))
        raw, delayed, active, done, dead, ring_len, ring = await pipe.execute()
        names = [name.decode() for name in ring]
        pipe = bus.redis.pipeline(transaction=False)
        for name in names:
            pipe.zcard(keys.lane(name))
            pipe.zrange(keys.lane(name), 0, 0)
        lane_replies = await pipe.execute() if names else []
        heads = [lane_replies[i + 1][0] if lane_replies[i + 1] else None for i in range(0, len(lane_replies), 2)]
        pipe = bus.redis.pipeline(transaction=False)
        for head in heads:
            pipe.hget(keys.job(head.decode()), "ready") if head else pipe.echo(b"")
        readies = await pipe.execute() if heads else []
    counters = {name: int(raw.get(name.encode(), 0)) for name in COUNTERS}
    serial = counters["claimed"]
    lane_stats = [
        LaneStats(name, int(lane_replies[2 * i]), serial - int(ready) if ready else 0)
        for i, (name, ready) in enumerate(zip(names, readies, strict=True))
    ]
    queued_sample = sum(s.depth for s in lane_stats)
    queued = queued_sample
    if ring_len > len(names):  # past the sample, count the rest of the lanes' depths too
        rest = await bus.redis.lrange(keys.ring, len(names), -1)
        pipe = bus.redis.pipeline(transaction=False)
        for name in rest:
            pipe.zcard(keys.lane(name.decode()))
        queued += sum(await pipe.execute())
    return Stats(
        counters=counters,
        queued=queued,
        delayed=int(delayed),
        active=int(active),
        done=int(done),
        dead=int(dead),
        lanes=lane_stats,
        lanes_total=int(ring_len),
        lag_max=int(raw.get(b"lag_max", 0)),
    )
