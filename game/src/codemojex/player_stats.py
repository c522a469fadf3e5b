"""A player's stats, read from their per-round results (``results:<PLR>``, kept by ``score.lua``).

The results hash holds one small field per round the player played: the round id -> the attempts they
took to solve it (0 while unsolved). ``score.lua`` sets it with each guess record it writes, from the
standing it has just folded, so a redelivered guess (which writes no record) changes nothing, and any
delivery order ends at the value of the admission-order fold. It lives apart from the round's per-guess
keys, so it outlasts their retention.

Only the latest ``GameSettings.results_kept`` played rounds are kept one by one: past that the oldest
are folded into the summary fields ``played solved best run best_run`` and ``upto`` (the last round
folded, taken as closed), so the hash stays bounded whatever the number of rounds played. A guess of a
round at or before ``upto`` scored after the fold (a dead-lettered guess retried much later, a round
left open that long) no longer changes the stats.

The summary (counts, best attempts, streaks) is :func:`codemojex.streaks.summarize`; the rounds still
open are read here (an open round not solved yet does not end a streak).
"""

from __future__ import annotations

from codemojex import rounds
from codemojex.game import Game, translate_errors
from codemojex.keys import PLAYER, ROUND, check_id
from codemojex.rounds import RoundStatus
from codemojex.streaks import Folded, PlayerStats, summarize


async def read_results(game: Game, player_id: str) -> tuple[dict[str, int], Folded]:
    """Round id -> attempts to solve (0: played, unsolved) for the rounds kept one by one, and the fold
    of the older ones."""
    key = game.keys.results(check_id(player_id, PLAYER))
    with translate_errors():
        raw: dict[bytes, bytes] = await game.redis.hgetall(key)
    fields = {name.decode(): value.decode() for name, value in raw.items()}
    results = {name: int(value) for name, value in fields.items() if name.startswith(ROUND)}
    best = int(fields.get("best", "0"))
    folded = Folded(
        played=int(fields.get("played", "0")),
        solved=int(fields.get("solved", "0")),
        best_attempts=best or None,
        run=int(fields.get("run", "0")),
        best_run=int(fields.get("best_run", "0")),
    )
    return results, folded


async def read_stats(game: Game, player_id: str) -> PlayerStats:
    """The player's stats (see :mod:`codemojex.streaks`); zeros for a player who never had a guess scored."""
    results, folded = await read_results(game, player_id)
    unsolved = sorted(round_id for round_id, attempts in results.items() if attempts == 0)
    still_open: set[str] = set()
    if unsolved:
        now = await rounds.server_ms(game)
        with translate_errors():
            async with game.redis.pipeline(transaction=False) as pipe:
                for round_id in unsolved:
                    pipe.hgetall(game.keys.round(round_id))
                rows = await pipe.execute()
        still_open = {
            round_id
            for round_id, row in zip(unsolved, rows, strict=True)
            if row and rounds.round_from_row(round_id, row).status_at(now) is not RoundStatus.CLOSED
        }
    return summarize(results, still_open, folded)
