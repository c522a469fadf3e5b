"""Per-player stats from their per-round results: rounds played, solved, best attempts and streaks.

Pure: no I/O. The input is what ``score.lua`` keeps per player (``results:<PLR>``, see
:mod:`codemojex.player_stats`): round id -> the attempts the player took to solve it, 0 for a round they
played (had a guess scored in) and have not solved. Rounds are taken in id order: the order the rounds
were created (minted), which is their open order but for a round opened with a delay (``delay_s``),
taken where it was created.

* **played**: rounds with at least one scored guess of the player; **solved**: those they solved;
* **best attempts**: the fewest attempts of a solved round (None before the first solve);
Only the player's latest played rounds are kept one by one (``GameSettings.results_kept``); older ones
are folded by ``score.lua`` into a :class:`Folded` summary, the same fold as here, taken as the start.

* **streak**: the player's played rounds taken in round order; a solved round extends the run, a
  *closed* round they did not solve ends it (back to 0); a round still open that they have not solved
  yet does neither (they may still solve it). **current streak** is the run after the last played round,
  **best streak** the longest run ever. Rounds the player did not play do not count either way.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PlayerStats:
    played: int
    solved: int
    best_attempts: int | None
    current_streak: int
    best_streak: int


@dataclass(frozen=True, slots=True)
class Folded:
    """The fold of the player's rounds before the ones kept one by one (all taken as closed)."""

    played: int = 0
    solved: int = 0
    best_attempts: int | None = None
    run: int = 0
    best_run: int = 0


def summarize(
    results: Mapping[str, int], open_rounds: Container[str], folded: Folded | None = None
) -> PlayerStats:
    """The stats of ``results`` (round id -> attempts to solve, 0 unsolved) after ``folded`` (None:
    nothing folded); ``open_rounds`` holds the rounds still open (an unsolved one there does not end a
    streak)."""
    folded = folded or Folded()
    run, best_run = folded.run, folded.best_run
    for round_id in sorted(results):
        if results[round_id] > 0:
            run += 1
            best_run = max(best_run, run)
        elif round_id not in open_rounds:
            run = 0
    solved = [attempts for attempts in results.values() if attempts > 0]
    if folded.best_attempts is not None:
        solved.append(folded.best_attempts)
    return PlayerStats(
        folded.played + len(results),
        folded.solved + len([a for a in results.values() if a > 0]),
        min(solved, default=None),
        run,
        best_run,
    )
