"""The leaderboard of a round, in rank order (:mod:`codemojex.ranking`): solved first, then best
feedback, then whoever reached it first (for a solved player: solved first), then fewer attempts.

The board is a function of the round's admitted guesses that were scored, never of the order or the
number of their deliveries: each player's guesses are folded (:func:`codemojex.ranking.fold`) in
**admission order**, the order of their GES ids (a GES takes its JOB's body, so GES order is the JOB's
mint order), each with its **admission time** (the job row's ``created``, on the Redis clock). So:

* an *attempt* is a scored guess admitted no later than the player's first solving guess (in admission
  order); a guess admitted after it is scored, but not counted (its record has ``attempt`` 0);
* the best time ``best_at_ms`` (ranked before attempts) is the admission time of the player's first
  guess, in admission order, with their best feedback (for a solved player, of their solving guess).

``score.lua`` keeps ``board:<RND>`` as a sorted set whose members (all at score 0) are
:func:`codemojex.ranking.board_member` strings, so byte order is rank order and a page of the board is
one ``ZRANGE``; it folds a guess scored out of admission order by refolding that player's records.
:func:`fold_records` is the same fold from the GES records alone, and :func:`recompute` its ranking; the
tests and the conformance suite hold the board equal to it.

**Boards of the earlier rule** (attempts before time; :func:`codemojex.ranking.is_legacy_member`), left
by a round scored before the upgrade, are never shown misordered: :func:`read_board` ranks the records
instead when its page holds such a member (a page without one is exact: an old member sorts before
every current member of its feedback, so it cannot belong in a page that ends past it), ``score.lua``
refolds such a player from their records when it next scores one of their guesses, and :func:`rebuild`
(``codemojex board RND --rebuild``) rewrites the whole board once, after which reads are one ``ZRANGE``
again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from codemojex import ranking
from codemojex.errors import Unavailable
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
        members = [raw.decode() for raw in await game.redis.zrange(key, 0, limit - 1)]
    if any(ranking.is_legacy_member(member) for member in members):
        standings = recompute(await scored_records(game, round_id))[:limit]
    else:
        standings = [ranking.parse_board_member(member) for member in members]
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for standing in standings:
                pipe.hget(game.keys.player(standing.player), "name")
            names = await pipe.execute()
    return [
        Entry(rank, standing, (name or b"?").decode())
        for rank, (standing, name) in enumerate(zip(standings, names, strict=True), start=1)
    ]


async def scored_records(game: Game, round_id: str) -> list[GuessRecord]:
    """Every GES record of the round, in admission order (GES id order)."""
    return (await _scored(game, round_id))[1]


async def _scored(game: Game, round_id: str) -> tuple[int, list[GuessRecord]]:
    """The number of GES ids in the round's scored set, and their records, in admission order."""
    with translate_errors():
        guess_ids = [raw.decode() for raw in await game.redis.zrange(game.keys.scored(round_id), 0, -1)]
        async with game.redis.pipeline(transaction=False) as pipe:
            for guess_id in guess_ids:
                pipe.hgetall(game.keys.guess(guess_id))
            rows = await pipe.execute()
    records = [record_from_row(guess_id, row) for guess_id, row in zip(guess_ids, rows, strict=True) if row]
    return len(guess_ids), records


@dataclass(frozen=True, slots=True)
class Fold:
    """Each player's standing, and each record's ``(counted, attempt)``, as the admission-order fold
    gives them (what ``score.lua`` stores on the board and in the records)."""

    standings: dict[str, ranking.Standing]  # player -> standing
    attempts: dict[str, tuple[bool, int]]  # GES id -> (counted, attempt); (False, 0) after the solve


def fold_records(records: Iterable[GuessRecord]) -> Fold:
    """Each player's records folded in admission order (GES id order) with their admission times."""
    standings: dict[str, ranking.Standing] = {}
    attempts: dict[str, tuple[bool, int]] = {}
    for record in sorted(records, key=lambda r: r.id):
        before = standings.get(record.player)
        after = ranking.fold(
            before,
            record.player,
            record.feedback.hits,
            record.feedback.nears,
            record.submitted_ms,
            length=len(record.feedback.marks),
        )
        counted = before is None or not before.solved
        standings[record.player] = after
        attempts[record.id] = (counted, after.attempts if counted else 0)
    return Fold(standings, attempts)


def recompute(records: Iterable[GuessRecord]) -> list[ranking.Standing]:
    """The ranking derived from the GES records alone: :func:`fold_records`, ranked."""
    return ranking.rank(fold_records(records).standings.values())


REBUILD_TRIES = 10


async def rebuild(game: Game, round_id: str) -> int:
    """Rewrite the round's standings and board from its records, in the current rule's members; the
    number of players on it. Safe to repeat and to run while guesses are scored: the write is fenced on
    the records read (``rebuild_board.lua``), and read again when a guess was scored in between; after
    :data:`REBUILD_TRIES` such reads it raises :class:`~codemojex.errors.Unavailable`, nothing changed.
    """
    for _ in range(REBUILD_TRIES):
        count, records = await _scored(game, round_id)
        standings = fold_records(records).standings
        pairs = [[player, ranking.board_member(standing)] for player, standing in standings.items()]
        keys = [game.keys.standing(round_id), game.keys.board(round_id), game.keys.scored(round_id)]
        done, players = await game.run("rebuild_board", keys, [count, json.dumps(pairs)])
        if done == 1:
            return int(players)
    raise Unavailable(f"round {round_id} kept scoring during {REBUILD_TRIES} rebuilds; nothing changed")
