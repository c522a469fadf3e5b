"""The leaderboard's ranking rules: how a player's standing folds in a guess, and how standings order.

Pure: no I/O, no clock. The order (:func:`sort_key`) is a total order on standings:

1. solved before unsolved;
2. better best feedback: more hits, then more nears (every solved player has the best: six hits);
3. earlier ``best_at_ms``: when the standing first reached its best, so for a solved player the **solve
   time**; the game folds guesses in admission order with their admission times
   (:func:`codemojex.leaderboard.fold_records`), so this is the admission time of the first guess with
   the best feedback (of the solving guess);
4. fewer attempts (counted up to :data:`ATTEMPTS_CAP`; beyond it attempts tie): only between standings
   that reached the same best in the same millisecond;
5. the player id, as a last resort.

**Why time before attempts** (issue 12, "throwaway accounts must not buy first place"). Feedback is per
position, so a few guesses on a free account reveal the code, and any rule that ranks on attempts is
won by replaying it on another account in one attempt. Ranked on when the best was reached, what a
player learns on other accounts arrives no sooner than what they could learn by the same guesses on
their own (a player may have many guesses queued at once), so it buys no place; what is left is
parallelism (each account is its own lane and its own rate limit), bounded by the per-address limits on
sign-up and guesses. Rounds are a race: the first to crack the code wins.

:func:`board_member` spells a standing as the member of the Redis leaderboard sorted set (all scores 0,
so Redis orders members by their bytes), such that **byte order of members is sort_key order**. Members
of the rule before this one (attempts before time, no ``@``; :func:`is_legacy_member`) are never read as
standings: ``score.lua`` refolds such a player from their records, :func:`codemojex.leaderboard.read_board`
ranks the records instead of a board holding one, and :func:`codemojex.leaderboard.rebuild` rewrites it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from codemojex.errors import InvalidInput

ATTEMPTS_CAP = 999_999
"""The most attempts a board member can tell apart (six digits); more attempts rank as this many."""
MAX_AT_MS = 10**13 - 1
"""The latest ``best_at_ms`` a board member can hold (thirteen digits; the year 2286)."""
BOARD_LENGTH = 6
"""The code length a board member is built for: hits and nears are written as ``6 - n``, one digit."""

_MEMBER = re.compile(r"([01])([0-6])([0-6])@([0-9]{13})([0-9]{6}):(.+)", re.DOTALL)
_LEGACY_MEMBER = re.compile(r"[01][0-6][0-6][0-9]{19}:.+", re.DOTALL)  # attempts(6) before time(13)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True)
class Standing:
    """A player's standing in one round, as the leaderboard ranks it.

    ``attempts`` counts the guesses folded in up to and including the solve; ``best_hits`` / ``best_nears``
    is the best feedback so far (hits first, then nears); ``best_at_ms`` is the time of the guess that
    first reached that best (the game folds in admission order, with admission times).
    Construction checks that the counts and time are non-negative integers and ``player`` is non-empty
    (else :class:`InvalidInput`); consistency with a code length is checked where the length is known.
    """

    player: str
    attempts: int
    best_hits: int
    best_nears: int
    solved: bool
    best_at_ms: int

    def __post_init__(self) -> None:
        player: object = self.player
        if not isinstance(player, str) or not player:
            raise InvalidInput(f"a standing's player is a non-empty string, got {player!r}")
        for name in ("attempts", "best_hits", "best_nears", "best_at_ms"):
            value = getattr(self, name)
            if not _is_count(value):
                raise InvalidInput(f"a standing's {name} is a non-negative integer, got {value!r}")
        solved: object = self.solved
        if not isinstance(solved, bool):
            raise InvalidInput(f"a standing's solved is a bool, got {solved!r}")


def sort_key(s: Standing) -> tuple[int, int, int, int, int, str]:
    """The ranking key, smallest first: solved, more hits, more nears, earlier, fewer attempts, player."""
    return (
        0 if s.solved else 1,
        -s.best_hits,
        -s.best_nears,
        s.best_at_ms,
        min(s.attempts, ATTEMPTS_CAP),
        s.player,
    )


def rank(standings: Iterable[Standing]) -> list[Standing]:
    """The standings, best first, in :func:`sort_key` order."""
    return sorted(standings, key=sort_key)


def _check_length(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"a code's length is a positive integer, got {value!r}")
    return value


def _check_feedback(hits: int, nears: int, length: int) -> None:
    if not _is_count(hits) or not _is_count(nears) or hits + nears > length:
        raise InvalidInput(
            f"feedback is hits and nears >= 0 with hits + nears <= {length}, got {hits!r} and {nears!r}"
        )


def _check_consistent(s: Standing, length: int) -> None:
    _check_feedback(s.best_hits, s.best_nears, length)
    if s.solved != (s.best_hits == length):
        raise InvalidInput(f"a standing is solved exactly when its best has {length} hits, got {s!r}")


def fold(
    standing: Standing | None, player: str, hits: int, nears: int, at_ms: int, *, length: int = 6
) -> Standing:
    """The standing of ``player`` after one more scored guess with feedback ``(hits, nears)`` at ``at_ms``.

    * ``None`` (no guess yet) becomes a standing of one attempt whose best is this guess;
    * a solved standing is returned unchanged: guesses after the solve do not count;
    * otherwise ``attempts`` grows by one, and if ``(hits, nears)`` is strictly better than the best
      (lexicographically) it becomes the best with ``best_at_ms = at_ms``; ``solved`` is ``hits == length``.

    So the best never gets worse, and ``best_at_ms`` is when the best was first reached. Raises
    :class:`InvalidInput` if the feedback is impossible for ``length``, the standing is another player's
    or inconsistent (solved without ``length`` hits), or ``at_ms`` is negative.
    """
    length = _check_length(length)
    _check_feedback(hits, nears, length)
    if not _is_count(at_ms):
        raise InvalidInput(f"a guess's time is a non-negative integer of milliseconds, got {at_ms!r}")
    if standing is None:
        return Standing(player, 1, hits, nears, hits == length, at_ms)
    if standing.player != player:
        raise InvalidInput(f"the standing is {standing.player!r}'s, not {player!r}'s")
    _check_consistent(standing, length)
    if standing.solved:
        return standing
    if (hits, nears) > (standing.best_hits, standing.best_nears):
        return Standing(player, standing.attempts + 1, hits, nears, hits == length, at_ms)
    return Standing(
        player, standing.attempts + 1, standing.best_hits, standing.best_nears, False, standing.best_at_ms
    )


def board_member(s: Standing) -> str:
    """The leaderboard sorted-set member of ``s``; byte order of members is :func:`sort_key` order.

    The format (a Lua script builds the same string, so it is fixed)::

        f"{0 if solved else 1}{6 - best_hits}{6 - best_nears}@"
        f"{best_at_ms:013d}{min(attempts, 999999):06d}:{player}"

    i.e. three digits, ``@``, nineteen digits, ``:`` and the player id (the ``@`` tells it from a member
    of the earlier rule, see :func:`is_legacy_member`). Every field before the player is fixed-width, so the
    player id only breaks ties, and UTF-8 byte order is code point order, which is Python's string order.
    Raises :class:`InvalidInput` for a standing the format cannot order: feedback impossible for a
    six-key code, ``solved`` without six hits (or six hits unsolved), or ``best_at_ms`` above
    :data:`MAX_AT_MS`.
    """
    _check_consistent(s, BOARD_LENGTH)
    if s.best_at_ms > MAX_AT_MS:
        raise InvalidInput(f"best_at_ms is at most {MAX_AT_MS} on the board, got {s.best_at_ms}")
    return (
        f"{0 if s.solved else 1}{BOARD_LENGTH - s.best_hits}{BOARD_LENGTH - s.best_nears}@"
        f"{s.best_at_ms:013d}{min(s.attempts, ATTEMPTS_CAP):06d}:{s.player}"
    )


def parse_board_member(member: str) -> Standing:
    """The standing a :func:`board_member` string spells (attempts read as written, at most the cap).

    Raises :class:`InvalidInput` if ``member`` is not in the format, or spells an inconsistent standing.
    """
    text: object = member
    match = _MEMBER.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidInput(f"not a leaderboard member: {member!r}")
    unsolved, hits_left, nears_left, at_ms, attempts, player = match.groups()
    standing = Standing(
        player=player,
        attempts=int(attempts),
        best_hits=BOARD_LENGTH - int(hits_left),
        best_nears=BOARD_LENGTH - int(nears_left),
        solved=unsolved == "0",
        best_at_ms=int(at_ms),
    )
    try:
        _check_consistent(standing, BOARD_LENGTH)
    except InvalidInput:
        raise InvalidInput(f"an inconsistent leaderboard member: {member!r}") from None
    return standing


def is_legacy_member(member: object) -> bool:
    """Whether ``member`` is a board member of the rule before solve time ranked first: 22 digits
    (solved, hits and nears left, attempts, then ``best_at_ms``), ``:`` and the player id.

    Its bytes order attempts before time, so it misorders among current members, and read as a current
    member its fields would be wrong: it is refolded from the records instead (see the module docstring).
    """
    return isinstance(member, str) and _LEGACY_MEMBER.fullmatch(member) is not None
