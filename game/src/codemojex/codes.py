"""A round's code, six keys of its keyboard: the secret, drawn at random (:func:`draw_secret`), and a
player's guess, parsed strictly onto the keyboard (:func:`parse_guess`).

Pure: no I/O; randomness only from :mod:`secrets` (a CSPRNG). A guess is text split into grapheme clusters
(:mod:`codemojex.emoji`), or a sequence of keys.

Guarantee: :func:`parse_guess` returns exactly ``length`` keys of the keyboard (in the keyboard's own
spelling), or raises :class:`~codemojex.errors.InvalidGuess` whose ``problem`` names the first thing
wrong.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence

import regex  # type: ignore[import-untyped]  # regex ships no type information

from codemojex.emoji import graphemes
from codemojex.errors import InvalidGuess, InvalidInput, InvalidOption
from codemojex.keyboard import Keyboard

BLANK = "_"
"""In a typed guess, marks a slot left blank (to be filled by a lock)."""
MAX_GUESS_CHARS = 256
"""The longest guess, in code points; longer text is refused before it is segmented."""

# Control (Cc), format (Cf) and lone surrogates (Cs), except ZWJ and the tag characters that emoji use.
_CONTROL = regex.compile(r"(?![\u200D\U000E0020-\U000E007F])[\p{Cc}\p{Cf}\p{Cs}]")
_WHITESPACE = regex.compile(r"\p{White_Space}")


def _check_length(value: object) -> int:
    """``value`` if it is a positive int (a code's length), else :class:`InvalidInput` (a caller's bug)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"a code's length is a positive integer, got {value!r}")
    return value


def draw_secret(keyboard: Keyboard, length: int = 6) -> tuple[str, ...]:
    """A secret of ``length`` keys of ``keyboard``, each drawn independently with :func:`secrets.choice`.

    Repeats are allowed. Raises :class:`InvalidOption` unless ``1 <= length <= MAX_GUESS_CHARS``.
    """
    value: object = length
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GUESS_CHARS:
        raise InvalidOption(f"a code's length is an integer from 1 to {MAX_GUESS_CHARS}, got {value!r}")
    return tuple(secrets.choice(keyboard.keys) for _ in range(length))


def _check_locks(locks: Mapping[int, str] | None, keyboard: Keyboard, length: int) -> dict[int, str]:
    """The locks as position -> key (in the keyboard's spelling); a bad lock is the caller's bug."""
    if locks is None:
        return {}
    if not isinstance(locks, Mapping):
        raise InvalidInput(f"locks map a position to an emoji, got {type(locks).__name__}")
    overlay: dict[int, str] = {}
    entries: Iterable[tuple[object, object]] = locks.items()
    for position, emoji in entries:
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < length:
            raise InvalidInput(f"a lock's position is an integer from 0 to {length - 1}, got {position!r}")
        key = keyboard.find(emoji) if isinstance(emoji, str) else None
        if key is None:
            raise InvalidInput(f"the lock at position {position} is {emoji!r}, which is not on the keyboard")
        overlay[position] = key
    return overlay


def _slots(guess: object) -> list[str | None]:
    """The typed slots of ``guess`` (``None`` for a blank), after the text-level checks, in their order."""
    if isinstance(guess, str):
        items: list[str | None] = [guess]
        size = len(guess)
    elif isinstance(guess, Sequence) and all(item is None or isinstance(item, str) for item in guess):
        items = list(guess)
        size = sum(1 if item is None else len(item) for item in items)
    else:
        raise InvalidGuess(
            f"a guess is text, or a sequence of keys and blanks, got {type(guess).__name__}", "not_text"
        )
    if size > MAX_GUESS_CHARS or len(items) > MAX_GUESS_CHARS:
        raise InvalidGuess(f"a guess is at most {MAX_GUESS_CHARS} characters, got {size}", "too_long")
    if guess == "" or not items:
        raise InvalidGuess("the guess is empty; type the emoji of your guess", "empty")
    texts = [item for item in items if item]
    for text in texts:
        if control := _CONTROL.search(text):
            raise InvalidGuess(
                f"the guess holds an invisible control character (U+{ord(control.group()):04X}); "
                "type only the emoji",
                "control",
            )
    for text in texts:
        if space := _WHITESPACE.search(text):
            raise InvalidGuess(
                f"the guess holds a space (U+{ord(space.group()):04X}); type the emoji without spaces",
                "whitespace",
            )
    if isinstance(guess, str):
        return [None if cluster == BLANK else cluster for cluster in graphemes(guess)]
    return [None if item in (None, "", BLANK) else item for item in items]


def parse_guess(
    guess: str | Sequence[str | None],
    keyboard: Keyboard,
    locks: Mapping[int, str] | None = None,
    *,
    length: int = 6,
) -> tuple[str, ...]:
    """The ``length`` keys of ``guess`` on ``keyboard``, with ``locks`` overlaid.

    ``guess`` is text, split into grapheme clusters, where ``_`` (:data:`BLANK`) is a blank slot; or a
    sequence of one key per slot, where ``None``, ``""`` or ``"_"`` is a blank slot. ``locks`` maps a
    0-based position to a key: the lock replaces whatever was typed at its position, blank or not.
    A typed key matches a key of the keyboard ignoring variation selectors; the result is spelled as on
    the keyboard.

    Raises :class:`InvalidGuess` with ``problem``, checked in this order: ``not_text`` (not a string or a
    sequence of strings and ``None``), ``too_long`` (over :data:`MAX_GUESS_CHARS` code points, before
    segmenting), ``empty``, ``control`` (a control or format character other than ZWJ, variation
    selectors and emoji tags), ``whitespace`` (any), ``wrong_length`` (not ``length`` slots),
    ``off_keyboard`` (an unlocked slot holds something not on the keyboard), ``blank`` (an unlocked slot
    is blank). Messages are for the player and count positions from 1. A lock at a position outside
    ``0..length-1`` or of an emoji not on the keyboard raises :class:`InvalidInput`: that is the
    caller's bug, not the player's.
    """
    if not isinstance(keyboard, Keyboard):
        raise InvalidInput(f"parse_guess needs a Keyboard, got {type(keyboard).__name__}")
    length = _check_length(length)
    overlay = _check_locks(locks, keyboard, length)
    slots = _slots(guess)
    if len(slots) != length:
        raise InvalidGuess(
            f"a guess is {length} emoji, but {len(slots)} {'was' if len(slots) == 1 else 'were'} found",
            "wrong_length",
        )
    keys: list[str | None] = [
        overlay[position] if position in overlay else None if typed is None else keyboard.find(typed)
        for position, typed in enumerate(slots)
    ]
    off = [
        f"{typed} at position {position + 1}"
        for position, typed in enumerate(slots)
        if typed is not None and keys[position] is None
    ]
    if off:
        raise InvalidGuess(f"not on this round's keyboard: {', '.join(off)}", "off_keyboard")
    blanks = [str(position + 1) for position, key in enumerate(keys) if key is None]
    if blanks:
        noun = "position" if len(blanks) == 1 else "positions"
        raise InvalidGuess(
            f"{noun} {', '.join(blanks)} left blank; only a locked position may be blank", "blank"
        )
    result = tuple(key for key in keys if key is not None)
    assert len(result) == length
    return result
