"""The leaderboard of a round, in rank order (:mod:`codemojex.ranking`): solved first, then best
feedback, then fewer attempts, then earlier.

``score.lua`` keeps ``board:<RND>`` as a sorted set whose members (all at score 0) are
:func:`codemojex.ranking.board_member` strings, so byte order is rank order and a page of the board is
one ``ZRANGE``. :func:`recompute` derives the same ranking from the GES records alone, by folding each
counted guess in submission order; a test holds the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex import ranking
from codemojex.game import Game, check_int, translate_errors
from codemojex.guesses import GuessRecord, record_from_row


@dataclass(frozen=True, slots=True)
class Entry:
    rank: int  # 1-based
    standing: ranking.Standing
    name: str


async def read_board(game: Game, round_id: str, limit: int = 100) -> list[Entry]:
    """The top ``limit`` of the round, with display names."""
    check_int("limit", limit, 1, 10_000)
    key = game.keys.board(round_id)
    with translate_errors():
        members = await game.redis.zrange(key, 0, limit - 1)
        standings = [ranking.parse_board_member(raw.decode()) for raw in members]
        pipe = game.redis.pipeline(transaction=False)
        for standing in standings:
            pipe.hget(game.keys.player(standing.player), "name")
        names = await pipe.execute()
    return [
        Entry(rank, standing, (name or b"?").decode())
        for rank, (standing, name) in enumerate(zip(standings, names, strict=True), start=1)
    ]


async def scored_records(game: Game, round_id: str) -> list[GuessRecord]:
    """Every GES record of the round, in the order they were scored."""
    with translate_errors():
        guess_ids = [raw.decode() for raw in await game.redis.zrange(game.keys.scored(round_id), 0, -1)]
        pipe = game.redis.pipeline(transaction=False)
        for guess_id in guess_ids:
            pipe.hgetall(game.keys.guess(guess_id))
        rows = await pipe.execute()
    return [record_from_row(guess_id, row) for guess_id, row in zip(guess_ids, rows, strict=True) if row]


def recompute(records: list[GuessRecord]) -> list[ranking.Standing]:
    """The ranking derived from the GES records alone: each player's guesses folded in scoring order."""
    standings: dict[str, ranking.Standing] = {}
    for record in sorted(records, key=lambda r: r.serial):
        standings[record.player] = ranking.fold(
            standings.get(record.player),
            record.player,
            record.feedback.hits,
            record.feedback.nears,
            record.submitted_ms,
        )
    return ranking.rank(standings.values())
