"""Per-player stats from their per-round results: rounds played, solved, best attempts and streaks.

Pure: no I/O. The input is what ``score.lua`` keeps per player (``results:<PLR>``, see
:mod:`codemojex.player_stats`): round id -> the attempts the player took to solve it, 0 for a round they
played (had a guess scored in) and have not solved. Round ids sort in the order the rounds were opened.

* **played**: rounds with at least one scored guess of the player; **solved**: those they solved;
* **best attempts**: the fewest attempts of a solved round (None before the first solve);
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


def summarize(results: Mapping[str, int], open_rounds: Container[str]) -> PlayerStats:
    """The stats of ``results`` (round id -> attempts to solve, 0 unsolved); ``open_rounds`` holds the
    rounds still open (an unsolved one there does not end a streak)."""
    run = best_run = 0
    for round_id in sorted(results):
        if results[round_id] > 0:
            run += 1
            best_run = max(best_run, run)
        elif round_id not in open_rounds:
            run = 0
    solved = [attempts for attempts in results.values() if attempts > 0]
    return PlayerStats(len(results), len(solved), min(solved, default=None), run, best_run)
