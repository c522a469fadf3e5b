"""A round's keyboard: 2 to 32 distinct emoji keys, drawn at random from a curated pool or given.

Pure: no I/O; randomness only from :mod:`secrets` (a CSPRNG). A key is one emoji grapheme cluster
(:mod:`codemojex.emoji`); a guess is parsed onto a keyboard, and a secret drawn from it, by
:mod:`codemojex.codes`.

Guarantees:

* A :class:`Keyboard` holds 2 to 32 distinct keys, each exactly one emoji grapheme
  (:func:`~codemojex.emoji.is_emoji`). Keys are distinct even when the emoji variation selectors U+FE0E /
  U+FE0F are ignored, so a heart typed without VS16 names the keyboard's heart with VS16 unambiguously.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from codemojex.emoji import fold, graphemes, is_emoji
from codemojex.errors import InvalidInput, InvalidKeyboard, InvalidOption

DEFAULT_SIZE = 8
MIN_SIZE = 2
MAX_SIZE = 32

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
            if fold(key) in seen:
                duplicates.append(key)
            seen.setdefault(fold(key), key)
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
        folded = fold(typed)
        for key in self.keys:
            if fold(key) == folded:
                return key
        return None


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
