"""A round's keyboard, and the parsing of a player's guess into keys of it.

Pure: no I/O; randomness only from :mod:`secrets` (a CSPRNG). Text is split into *extended grapheme
clusters* with the ``regex`` package's ``\\X`` (UAX #29), so a skin-toned emoji (``👍🏽``), a ZWJ sequence
(man, ZWJ, woman, ZWJ, girl: a family), a flag (``🇫🇷``), a pictograph with VS16 (U+2764 U+FE0F, the red
heart) and a keycap (``1`` U+FE0F U+20E3) are one key each.

Guarantees:

* A :class:`Keyboard` holds 2 to 32 distinct keys, each exactly one emoji grapheme (:func:`is_emoji`).
  Keys are distinct even when the emoji variation selectors U+FE0E / U+FE0F are ignored, so a heart
  typed without VS16 names the keyboard's heart with VS16 unambiguously.
* :func:`parse_guess` returns exactly ``length`` keys of the keyboard (in the keyboard's own spelling), or
  raises :class:`~codemojex.errors.InvalidGuess` whose ``problem`` names the first thing wrong.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import regex  # type: ignore[import-untyped]  # regex ships no type information

from codemojex.errors import InvalidGuess, InvalidInput, InvalidKeyboard, InvalidOption

DEFAULT_SIZE = 8
MIN_SIZE = 2
MAX_SIZE = 32
BLANK = "_"
"""In a typed guess, marks a slot left blank (to be filled by a lock)."""
MAX_GUESS_CHARS = 256
"""The longest guess, in code points; longer text is refused before it is segmented."""

EMOJI_POOL: tuple[str, ...] = (
    # fruit and vegetables
    "🍎", "🍐", "🍊", "🍋", "🍌", "🍉", "🍇", "🍓", "🍒", "🍑",
    "🍍", "🥝", "🥥", "🥑", "🍆", "🥕", "🌽", "🍄",
    # animals
    "🐶", "🐱", "🐭", "🐰", "🦊", "🐻", "🐼", "🐨", "🐯", "🦁", "🐮", "🐷", "🐸", "🐵", "🐔", "🐧", "🦉",
    "🦄", "🐝", "🦋", "🐌", "🐢", "🐙", "🦀", "🐳",
    # objects and nature
    "⚽", "🏀", "🎈", "🎁", "🔑", "💎", "🔔", "🎸", "🚀", "⏰", "📚", "🌵", "🌻", "🎲", "⭐", "🔥",
    # several code points each
    "\U0001f1eb\U0001f1f7",  # 🇫🇷 flag: two regional indicators
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # 🏳️‍🌈 rainbow flag: a ZWJ sequence
    "\U0001f44d\U0001f3fd",  # 👍🏽 thumbs up with a medium skin tone
    "\u270f\ufe0f",  # ✏️ pencil: a text-default pictograph with VS16
    "\u2764\ufe0f",  # ❤️ red heart: the same
)  # fmt: skip
"""The curated, widely rendered emoji that :func:`random_keyboard` draws from (64 of them)."""

_GRAPHEME = regex.compile(r"\X")

# One element of an emoji: a flag, a keycap, a modifier base with a skin tone, or a pictograph, optionally
# with VS16 or a tag sequence (subdivision flags such as England's). Pictographs are Extended_Pictographic
# and Emoji, which leaves out unassigned code points and plain digits, letters, # and *.
_RI_PAIR = r"\p{Regional_Indicator}{2}"
_KEYCAP = r"[0-9#*]\uFE0F\u20E3"
_PICTO = r"(?=\p{Extended_Pictographic})\p{Emoji}"
_MODIFIED = r"(?=\p{Emoji_Modifier_Base})\p{Emoji}\p{Emoji_Modifier}"
_TAGS = r"[\U000E0020-\U000E007E]+\U000E007F"
_ELEMENT = rf"(?:{_RI_PAIR}|{_KEYCAP}|{_MODIFIED}|{_PICTO}(?:\uFE0F|{_TAGS})?)"
# The first element must be shown as an emoji: emoji-default, or made so by VS16, a skin tone or tags.
# Later elements of a ZWJ sequence may omit VS16 (minimally-qualified sequences render as emoji).
_FIRST = (
    rf"(?:{_RI_PAIR}|{_KEYCAP}|{_MODIFIED}|{_PICTO}(?:\uFE0F|{_TAGS})|(?=\p{{Emoji_Presentation}}){_PICTO})"
)
_EMOJI = regex.compile(rf"{_FIRST}(?:\u200D{_ELEMENT})*")

# Control (Cc), format (Cf) and lone surrogates (Cs), except ZWJ and the tag characters that emoji use.
_CONTROL = regex.compile(r"(?![\u200D\U000E0020-\U000E007F])[\p{Cc}\p{Cf}\p{Cs}]")
_WHITESPACE = regex.compile(r"\p{White_Space}")
_SELECTORS = str.maketrans("", "", "\ufe0e\ufe0f")


def graphemes(text: str) -> list[str]:
    """Split ``text`` into its extended grapheme clusters (UAX #29), in order; ``""`` gives ``[]``."""
    clusters: list[str] = _GRAPHEME.findall(text)
    return clusters


def is_emoji(cluster: str) -> bool:
    """True iff ``cluster`` is exactly one grapheme cluster that is shown as an emoji.

    That is: a pair of regional indicators (a flag, ``🇫🇷``); a keycap ``[0-9#*]`` U+FE0F U+20E3; or an
    Extended_Pictographic emoji that is emoji-presentation by default (``🍎``) or made so by VS16 (U+2764
    U+FE0F), a skin-tone modifier (``👍🏽``) or a tag sequence (England's flag), optionally continued by
    ZWJ-joined elements (a family). A bare digit, letter, ``#`` or ``*``, a text-default pictograph
    without VS16 (a bare U+2764) and a lone skin-tone swatch are not emoji.
    """
    value: object = cluster
    if not isinstance(value, str) or len(graphemes(value)) != 1:
        return False
    return _EMOJI.fullmatch(cluster) is not None


def _fold(key: str) -> str:
    """``key`` without emoji / text variation selectors: how two spellings of one emoji compare."""
    return key.translate(_SELECTORS)


@dataclass(frozen=True, slots=True)
class Keyboard:
    """The keys of a round: ``MIN_SIZE`` to ``MAX_SIZE`` distinct emoji, each one grapheme cluster.

    Every instance is valid (construction validates, raising :class:`InvalidKeyboard`); the keys keep
    their order, which is the order a client shows them in.
    """

    keys: tuple[str, ...]

    def __post_init__(self) -> None:
        keys = self.keys
        if not isinstance(keys, tuple):
            raise InvalidKeyboard(f"a keyboard's keys are a tuple of emoji, got {type(keys).__name__}")
        if not MIN_SIZE <= len(keys) <= MAX_SIZE:
            raise InvalidKeyboard(
                f"a keyboard has {MIN_SIZE} to {MAX_SIZE} keys, got {len(keys)}: {''.join(map(str, keys))!r}"
            )
        for position, key in enumerate(keys, start=1):
            if not isinstance(key, str):
                raise InvalidKeyboard(f"key {position} is not a string: {key!r}")
            if not is_emoji(key):
                found = len(graphemes(key))
                what = "not an emoji" if found <= 1 else f"{found} characters, not one emoji"
                raise InvalidKeyboard(f"key {position} ({key!r}) is {what}; every key is exactly one emoji")
        seen: dict[str, str] = {}
        duplicates: list[str] = []
        for key in keys:
            if _fold(key) in seen:
                duplicates.append(key)
            seen.setdefault(_fold(key), key)
        if duplicates:
            raise InvalidKeyboard(
                f"a keyboard's keys are distinct, but {''.join(dict.fromkeys(duplicates))} "
                "appear more than once"
            )

    @classmethod
    def of(cls, keys: str | Sequence[str]) -> Keyboard:
        """A keyboard from a string (split into grapheme clusters) or a sequence of keys.

        Raises :class:`InvalidKeyboard` unless there are ``MIN_SIZE`` to ``MAX_SIZE`` keys, each exactly
        one emoji, all distinct.
        """
        if isinstance(keys, str):
            return cls(tuple(graphemes(keys)))
        value: object = keys
        if not isinstance(value, Sequence) or isinstance(value, bytes | bytearray | memoryview):
            raise InvalidKeyboard(
                f"a keyboard is a string or a sequence of emoji, got {type(value).__name__}"
            )
        return cls(tuple(keys))

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys)

    def text(self) -> str:
        """The keys joined with nothing; ``Keyboard.of(kb.text()) == kb``."""
        return "".join(self.keys)

    def find(self, typed: str) -> str | None:
        """The key that ``typed`` spells, ignoring variation selectors U+FE0E / U+FE0F, else ``None``.

        ``find("\\u2764")`` is ``"\\u2764\\ufe0f"`` (the red heart) on a keyboard that has it: input
        methods differ in whether they send VS16, and a player means the same key either way.
        """
        if typed in self.keys:
            return typed
        folded = _fold(typed)
        for key in self.keys:
            if _fold(key) == folded:
                return key
        return None


def _check_length(value: object) -> int:
    """``value`` if it is a positive int (a code's length), else :class:`InvalidInput` (a caller's bug)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"a code's length is a positive integer, got {value!r}")
    return value


def _check_size(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidOption(f"{name} is an integer from {low} to {high}, got {value!r}")
    return value


def random_keyboard(
    size: int = DEFAULT_SIZE, *, choice: Callable[[Sequence[str]], str] | None = None
) -> Keyboard:
    """A keyboard of ``size`` distinct keys drawn uniformly from :data:`EMOJI_POOL`.

    Draws with :mod:`secrets` (a CSPRNG) unless ``choice`` is given: it is called with the keys still
    available and must return one of them (for tests only). Raises :class:`InvalidOption` unless
    ``MIN_SIZE <= size <= MAX_SIZE``.
    """
    size = _check_size(size, "a keyboard's size", MIN_SIZE, min(MAX_SIZE, len(EMOJI_POOL)))
    if choice is None:
        return Keyboard(tuple(secrets.SystemRandom().sample(EMOJI_POOL, size)))
    available = list(EMOJI_POOL)
    keys: list[str] = []
    for _ in range(size):
        key = choice(tuple(available))
        if key not in available:
            raise InvalidInput(f"choice must return one of the keys it is given, got {key!r}")
        available.remove(key)
        keys.append(key)
    return Keyboard(tuple(keys))


def draw_secret(keyboard: Keyboard, length: int = 6) -> tuple[str, ...]:
    """A secret of ``length`` keys of ``keyboard``, each drawn independently with :func:`secrets.choice`.

    Repeats are allowed. Raises :class:`InvalidOption` unless ``1 <= length <= MAX_GUESS_CHARS``.
    """
    length = _check_size(length, "a code's length", 1, MAX_GUESS_CHARS)
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
