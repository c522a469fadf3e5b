"""Keyboard marks and the share grid: what a player's own scored guesses tell them, and nothing more."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.engine import Feedback, score
from codemojex.errors import InvalidInput
from codemojex.hints import KeyMark, ScoredRow, key_marks, share_grid

SECRET = ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")
KEYS = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥")


def scored(*guesses: tuple[str, ...]) -> list[tuple[tuple[str, ...], Feedback]]:
    return [(guess, score(SECRET, guess)) for guess in guesses]


def test_no_guesses_mark_no_key():
    """Before any scored guess nothing is known."""
    assert key_marks([]) == {}


def test_hits_and_nears_are_in_misses_of_absent_keys_are_out():
    """🍎🍌🍒🍇🍑🍍 scores HHNN--: the four fruits are in, 🍑 and 🍍 are out."""
    assert key_marks(scored(("🍎", "🍌", "🍒", "🍇", "🍑", "🍍"))) == {
        "🍎": KeyMark.IN,
        "🍌": KeyMark.IN,
        "🍒": KeyMark.IN,
        "🍇": KeyMark.IN,
        "🍑": KeyMark.OUT,
        "🍍": KeyMark.OUT,
    }


def test_a_repeated_key_with_one_miss_is_still_in():
    """🍒 six times scores ----H-: its five misses say "no more 🍒", not "no 🍒": it is in."""
    assert key_marks(scored(("🍒",) * 6)) == {"🍒": KeyMark.IN}


def test_a_repeated_key_near_once_and_missed_after_is_in():
    """🍌 near at the left, then misses (only one 🍌 in the code): in, never out."""
    marks = key_marks(scored(("🍑", "🍑", "🍌", "🍌", "🍌", "🍑")))
    assert marks == {"🍌": KeyMark.IN, "🍑": KeyMark.OUT}


def test_knowledge_accumulates_over_guesses():
    """Two guesses: the union of what each one shows."""
    marks = key_marks(scored(("🍑", "🍑", "🍑", "🍑", "🍑", "🍑"), ("🥥", "🍎", "🥥", "🥥", "🥥", "🥥")))
    assert marks == {"🍑": KeyMark.OUT, "🥥": KeyMark.OUT, "🍎": KeyMark.IN}


def test_marks_and_guess_of_different_lengths_are_refused():
    """A guess and a feedback that do not line up are a bug, not something to guess around."""
    with pytest.raises(InvalidInput):
        key_marks([(("🍎",) * 5, Feedback.from_code("HHHHHH"))])


@given(
    st.tuples(*[st.sampled_from(KEYS)] * 6),
    st.lists(st.tuples(*[st.sampled_from(KEYS)] * 6), max_size=6),
)
def test_marks_never_contradict_the_secret(secret, guesses):
    """Whatever the secret and the guesses: every key marked in is in it, every key marked out is not."""
    marks = key_marks([(guess, score(secret, guess)) for guess in guesses])
    for key, mark in marks.items():
        assert (key in secret) is (mark is KeyMark.IN)
    assert set(marks) <= {key for guess in guesses for key in guess}


def row(code: str, attempt: int) -> ScoredRow:
    return ScoredRow(Feedback.from_code(code), attempt)


def test_the_share_grid_of_a_solved_round():
    """One row per counted attempt in attempt order, 🟩 hit 🟨 near ⬜ miss, the round and the count."""
    text = share_grid("RND0000000000000000000000", [row("HHHHHH", 3), row("N-----", 1), row("HHN--H", 2)])
    assert text == (
        "Codemojex RND0000000000000000000000 · solved in 3\n🟨⬜⬜⬜⬜⬜\n🟩🟩🟨⬜⬜🟩\n🟩🟩🟩🟩🟩🟩"
    )


def test_the_share_grid_of_an_unsolved_round_and_uncounted_guesses():
    """Not solved: the tries so far; a guess admitted after the solving one (attempt 0) has no row."""
    assert share_grid("RND1", [row("-N----", 1), row("HH----", 2)]) == (
        "Codemojex RND1 · 2 tries, not solved\n⬜🟨⬜⬜⬜⬜\n🟩🟩⬜⬜⬜⬜"
    )
    solved = share_grid("RND1", [row("HHHHHH", 1), row("------", 0)])
    assert solved == "Codemojex RND1 · solved in 1\n🟩🟩🟩🟩🟩🟩"
    assert share_grid("RND1", []) is None


def test_the_share_grid_holds_no_emoji_of_the_guesses():
    """Only the three squares, the round id, the count: never a key of the keyboard or the secret."""
    text = share_grid("RND1", [row("HN-HN-", 1)])
    assert text is not None
    assert not set("".join(KEYS)) & set(text)
