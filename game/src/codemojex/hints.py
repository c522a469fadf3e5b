"""What a player's own scored guesses tell them: keyboard marks and the shareable result grid.

Pure: no I/O. Both read only the player's guesses and the feedback they got, never the secret, so what
they show a player is what that player could work out by hand.

**Keyboard marks** (:func:`key_marks`). By the scoring rule (:mod:`codemojex.engine`), a key of a guess
that is marked hit or near somewhere is in the code. A key that is marked miss at *every* position of a
guess that holds it is not in the code at all: were it in the code, either one of its positions would be
a hit, or its leftmost non-hit occurrence would be a near. A key with a miss and also a hit or near in
the same guess is in the code (its misses only say the code holds no more copies where they could go),
so it is marked in. Marks accumulate over the guesses; a key never guessed has no mark.

**Share grid** (:func:`share_grid`). One row a counted attempt, in attempt order (the admission order the
leaderboard folds in), 🟩 hit, 🟨 near, ⬜ miss; a first line with the round id and the number of
attempts. It holds no emoji of the guesses and nothing of the secret but what the squares say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from codemojex.engine import Feedback, Mark
from codemojex.errors import InvalidInput

SQUARES = {Mark.HIT: "🟩", Mark.NEAR: "🟨", Mark.MISS: "⬜"}


class KeyMark(StrEnum):
    """What is known of one key of the keyboard."""

    IN = "in"  # the code holds it (a hit or a near in some guess)
    OUT = "out"  # the code does not hold it (every occurrence in some guess was a miss)


def key_marks(scored: Iterable[tuple[Sequence[str], Feedback]]) -> dict[str, KeyMark]:
    """The keys known to be in or out of the code from ``scored`` (guess, feedback) pairs, by the rule in
    the module docstring; keys never guessed are absent. :class:`InvalidInput` if a guess and its
    feedback differ in length."""
    known_in: set[str] = set()
    known_out: set[str] = set()
    for guess, feedback in scored:
        if len(guess) != len(feedback.marks):
            raise InvalidInput(f"a guess of {len(guess)} keys with {len(feedback.marks)} marks")
        found = {key for key, mark in zip(guess, feedback.marks, strict=True) if mark is not Mark.MISS}
        known_in |= found
        known_out |= set(guess) - found
    marks = dict.fromkeys(sorted(known_out - known_in), KeyMark.OUT)
    marks.update(dict.fromkeys(sorted(known_in), KeyMark.IN))
    return marks


@dataclass(frozen=True, slots=True)
class ScoredRow:
    """One scored guess as the grid needs it: its feedback and its attempt (0: not counted)."""

    feedback: Feedback
    attempt: int


def share_grid(round_id: str, rows: Iterable[ScoredRow]) -> str | None:
    """The shareable text of a round's counted attempts (see the module docstring); None if there are
    none."""
    counted = sorted((row for row in rows if row.attempt > 0), key=lambda row: row.attempt)
    if not counted:
        return None
    solved = any(row.feedback.solved for row in counted)
    n = len(counted)
    head = f"solved in {n}" if solved else f"{n} tr{'y' if n == 1 else 'ies'}, not solved"
    lines = [f"Codemojex {round_id} · {head}"]
    lines += ["".join(SQUARES[mark] for mark in row.feedback.marks) for row in counted]
    return "\n".join(lines)
