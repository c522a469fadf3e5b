"""Per-player stats from the compact per-round results: counts, best attempts and the streak rule."""

from __future__ import annotations

from codemojex.streaks import Folded, PlayerStats, summarize

R1, R2, R3, R4, R5 = (f"RND{n}" for n in range(1, 6))


def test_no_rounds_played():
    """A new player: zeros and no best."""
    assert summarize({}, set()) == PlayerStats(0, 0, None, 0, 0)


def test_counts_and_best_attempts():
    """Played, solved, and the fewest attempts of a solved round (0 means played, not solved)."""
    stats = summarize({R1: 4, R2: 0, R3: 2}, set())
    assert (stats.played, stats.solved, stats.best_attempts) == (3, 2, 2)


def test_the_streak_counts_solved_rounds_in_round_order():
    """Solved R1 R2, missed R3, solved R4 R5: current 2, best 2; round ids order, not the mapping's."""
    stats = summarize({R5: 3, R3: 0, R1: 1, R4: 2, R2: 6}, set())
    assert (stats.current_streak, stats.best_streak) == (2, 2)


def test_a_closed_unsolved_round_ends_the_current_streak():
    """Solved R1 R2 R3, then R4 played and closed unsolved: current 0, best 3."""
    stats = summarize({R1: 1, R2: 1, R3: 1, R4: 0}, set())
    assert (stats.current_streak, stats.best_streak) == (0, 3)


def test_an_open_round_not_solved_yet_neither_ends_nor_extends_it():
    """R3 still open and unsolved: the streak of R1 R2 stands (the player may still solve R3)."""
    stats = summarize({R1: 1, R2: 1, R3: 0}, {R3})
    assert (stats.current_streak, stats.best_streak) == (2, 2)
    solved_later = summarize({R1: 1, R2: 1, R3: 5}, {R3})
    assert (solved_later.current_streak, solved_later.best_streak) == (3, 3)


def test_rounds_not_played_do_not_break_a_streak():
    """Only played rounds count: R2 skipped between two solved rounds keeps the streak at 2."""
    assert summarize({R1: 2, R3: 2}, set()).current_streak == 2


def test_the_kept_rounds_continue_the_fold_of_the_older_ones():
    """Folded: 5 played, 4 solved, best 2, a run of 3 (best 4); then R1 solved in 1 and R2 solved: 7
    played, 6 solved, best 1, current 5, best 5."""
    folded = Folded(played=5, solved=4, best_attempts=2, run=3, best_run=4)
    assert summarize({R1: 1, R2: 3}, set(), folded) == PlayerStats(7, 6, 1, 5, 5)
    assert summarize({R1: 0}, set(), folded) == PlayerStats(6, 4, 2, 0, 4)
