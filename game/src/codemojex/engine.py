"""The scoring engine: hit / near / miss feedback for a guess against a secret, in linear time.

Pure: no I/O, no clock, no randomness. Keys are compared as whole strings, so a key may be any
string (the game uses emoji grapheme clusters such as ``"👍🏽"``); the engine never looks inside one.

The rule, for a secret and a guess of the same length ``n >= 1``:

* position ``i`` is a **hit** when ``guess[i] == secret[i]``;
* the secret's *unmatched* keys are the keys at its non-hit positions, counted with multiplicity;
* the guess's non-hit positions are visited **left to right**, and each one whose key is still among the
  unmatched keys is a **near** and uses up one occurrence of that key; every other position is a **miss**.

So a key is near at most as many times as it occurs among the secret's non-hit positions, and when a guess
repeats a key more often than that, its *leftmost* non-hit occurrences are the near ones. Hits plus nears is
the size of the multiset intersection of secret and guess, which is why it is symmetric in the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from codemojex.errors import InvalidInput

LENGTH = 6
"""The game's code length: a secret and every guess are six keys."""


class Mark(StrEnum):
    """The feedback for one position of a guess."""

    HIT = "hit"
    NEAR = "near"
    MISS = "miss"


_LETTER = {Mark.HIT: "H", Mark.NEAR: "N", Mark.MISS: "-"}
_MARK = {letter: mark for mark, letter in _LETTER.items()}


@dataclass(frozen=True, slots=True)
class Feedback:
    """The marks of one scored guess, one per position; never empty.

    ``hits + nears + misses == len(marks)`` always holds, as the counts are computed from ``marks``.
    """

    marks: tuple[Mark, ...]

    def __post_init__(self) -> None:
        marks: object = self.marks
        if not isinstance(marks, tuple) or not marks:
            raise InvalidInput(f"feedback is a non-empty tuple of marks, got {marks!r}")
        if not all(isinstance(mark, Mark) for mark in marks):
            raise InvalidInput(f"feedback holds only Mark values, got {marks!r}")

    @property
    def hits(self) -> int:
        """How many positions hold the right key."""
        return self.marks.count(Mark.HIT)

    @property
    def nears(self) -> int:
        """How many positions hold a key of the secret that belongs elsewhere."""
        return self.marks.count(Mark.NEAR)

    @property
    def misses(self) -> int:
        """How many positions are neither hit nor near."""
        return self.marks.count(Mark.MISS)

    @property
    def solved(self) -> bool:
        """True when every position is a hit: the guess is the secret."""
        return all(mark is Mark.HIT for mark in self.marks)

    def code(self) -> str:
        """One letter per position: ``H`` hit, ``N`` near, ``-`` miss (e.g. ``"HN--H-"``)."""
        return "".join(_LETTER[mark] for mark in self.marks)

    @classmethod
    def from_code(cls, code: str) -> Feedback:
        """The inverse of :meth:`code`; raises :class:`InvalidInput` on anything but ``[HN-]+``."""
        text: object = code
        if not isinstance(text, str) or not text:
            raise InvalidInput(f"a feedback code is a non-empty string of H, N and -, got {code!r}")
        try:
            return cls(tuple(_MARK[letter] for letter in code))
        except KeyError:
            raise InvalidInput(f"a feedback code holds only H, N and -, got {code!r}") from None


def score(secret: Sequence[str], guess: Sequence[str]) -> Feedback:
    """Score ``guess`` against ``secret`` by the rule in the module docstring, in O(n) time.

    Both must have the same length, at least 1, else :class:`InvalidInput`. Keys must be hashable (strings).
    """
    if len(secret) != len(guess):
        raise InvalidInput(f"secret and guess differ in length ({len(secret)} and {len(guess)} keys)")
    if not secret:
        raise InvalidInput("secret and guess are empty; a code has at least one key")
    marks = [Mark.MISS] * len(guess)
    unmatched: Counter[str] = Counter()
    for i, (want, got) in enumerate(zip(secret, guess, strict=True)):
        if want == got:
            marks[i] = Mark.HIT
        else:
            unmatched[want] += 1
    for i, got in enumerate(guess):
        if marks[i] is not Mark.HIT and unmatched[got] > 0:
            marks[i] = Mark.NEAR
            unmatched[got] -= 1
    return Feedback(tuple(marks))
