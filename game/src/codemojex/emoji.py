"""What an emoji is, as a key of the game: text split into *extended grapheme clusters* with the ``regex``
package's ``\\X`` (UAX #29), so a skin-toned emoji (``👍🏽``), a ZWJ sequence (man, ZWJ, woman, ZWJ, girl: a
family), a flag (``🇫🇷``), a pictograph with VS16 (U+2764 U+FE0F, the red heart) and a keycap (``1`` U+FE0F
U+20E3) are one cluster each; :func:`is_emoji` says which clusters are emoji, and :func:`fold` how two
spellings of one emoji compare.

Pure: no I/O.
"""

from __future__ import annotations

import regex  # type: ignore[import-untyped]  # regex ships no type information

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


def fold(key: str) -> str:
    """``key`` without emoji / text variation selectors: how two spellings of one emoji compare."""
    return key.translate(_SELECTORS)
