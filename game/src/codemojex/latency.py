"""The submit->scored latency histogram that ``score.lua`` keeps in ``cmx:{t}:latency``.

A guess's latency is its scoring time minus its admission time, both on the Redis server's clock. The
script counts each guess once, when it writes the record (so a redelivered job is not observed twice),
in the first bucket whose upper bound (ms) holds it; :func:`read_latency` returns the cumulative counts
that a Prometheus histogram exposes.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.game import Game, translate_errors

# Upper bounds in ms, as score.lua's BUCKETS (a unit test holds the two equal).
BUCKETS_MS: tuple[int, ...] = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


@dataclass(frozen=True, slots=True)
class Histogram:
    cumulative: tuple[tuple[int, int], ...]  # (upper bound ms, guesses at or under it), ascending
    count: int  # every observed guess (the +Inf bucket)
    sum_ms: int


async def read_latency(game: Game) -> Histogram:
    """The histogram as it stands (one HGETALL)."""
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(game.keys.latency)
    running = 0
    cumulative = []
    for bound in BUCKETS_MS:
        running += int(row.get(f"le_{bound}".encode(), b"0"))
        cumulative.append((bound, running))
    return Histogram(tuple(cumulative), int(row.get(b"count", b"0")), int(row.get(b"sum_ms", b"0")))


def merge_latency(parts: list[Histogram]) -> Histogram:
    """The histogram of a spread game: its partitions' counts summed, bucket by bucket."""
    cumulative = tuple(
        (bound, sum(part.cumulative[i][1] for part in parts))
        for i, (bound, _) in enumerate(parts[0].cumulative)
    )
    return Histogram(cumulative, sum(part.count for part in parts), sum(part.sum_ms for part in parts))
