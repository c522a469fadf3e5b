"""Display names: what a player may be called, and when two names are the same name.

A name is normalised to NFKC and stripped, then refused (:class:`~codemojex.errors.InvalidName`) if it
is empty or shows nothing (only spaces, format characters, fillers such as U+3164 HANGUL FILLER or
U+2800 BRAILLE PATTERN BLANK, variation selectors or combining marks), if it is longer than
:data:`MAX_NAME` code points, if it holds a control, line, format (ZWJ excepted), filler, private-use,
unassigned or surrogate character, or if more than :data:`MAX_MARKS` combining marks stack on one
character ("zalgo" text).

Two names are the same name when their :func:`skeleton` is: NFKC, case folded, look-alike letters and
the digits 0 and 1 mapped to the Latin letters they pass for, joiners and variation selectors dropped,
runs of spaces made one. The look-alikes are a hand-picked part of Unicode TR39's confusables
(:data:`LOOKALIKES`: letters of Cyrillic, Greek, Armenian and Cherokee, Latin small capitals and IPA
letters that render as a Latin letter), not the whole table. A name whose skeleton another player holds
is taken (``Bob``, ``BOB``, ``B\\u043eb`` (with a Cyrillic o) and ``B0b`` are one name).

Duplicates are disambiguated by suggestion, not by a discriminator shown on every name: a taken name
is refused, and :func:`variants` proposes names like it (the name, a space and a number: ``Bob 2``,
``Bob 47``, ``Bob 3816``), of which the caller (:func:`codemojex.players.suggest_name`) offers one that
nobody holds. The player keeps a name of their own choosing, and no two players pass for each other.

Pure: imports neither Redis nor echomq.
"""

from __future__ import annotations

import random
import unicodedata

from codemojex.errors import InvalidName

MAX_NAME = 32  # code points after NFKC
MAX_MARKS = 2  # combining marks stacked on one character

# Characters that render as nothing (or as a blank) yet are neither spaces nor format characters.
FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
_VARIATION = frozenset(chr(c) for c in [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
_REFUSED = frozenset({"Cc", "Cs", "Co", "Cn", "Zl", "Zp"})
_MARKS = frozenset({"Mn", "Me"})
_BLANK = frozenset({"Zs", "Cf", "Mn", "Me", "Mc"})
ZWJ = "\u200d"

# After case folding: a letter of another script (or a digit) -> the Latin letter it passes for, from
# Unicode TR39's confusables: Cyrillic a e o p c y x i j s, d q w h l v, straight u; Greek alpha beta
# epsilon zeta eta iota kappa mu nu omicron rho tau upsilon chi, lunate sigma, yot; Armenian o u n h g;
# Latin alpha, script g, dotless i, iota and the small capitals c o v w z u y r; Cherokee capitals
# (Python does not case-fold them) A B C D E G H i J K L M P R S T V W Y Z; the digits 0 and 1.
_CONFUSABLE = {
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y",
    "\u0445": "x", "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u0501": "d", "\u051b": "q",
    "\u051d": "w", "\u04bb": "h", "\u04cf": "l", "\u0475": "v", "\u04af": "y",
    "\u03b1": "a", "\u03b2": "b", "\u03b5": "e", "\u03b6": "z", "\u03b7": "h", "\u03b9": "i",
    "\u03ba": "k", "\u03bc": "m", "\u03bd": "n", "\u03bf": "o", "\u03c1": "p", "\u03c4": "t",
    "\u03c5": "y", "\u03c7": "x", "\u03f2": "c", "\u03f3": "j",
    "\u0585": "o", "\u057d": "u", "\u0578": "n", "\u0570": "h", "\u0581": "g",
    "\u0251": "a", "\u0261": "g", "\u0131": "i", "\u0269": "i", "\u1d04": "c", "\u1d0f": "o",
    "\u1d20": "v", "\u1d21": "w", "\u1d22": "z", "\u1d1c": "u", "\u028f": "y", "\u0280": "r",
    "\u13aa": "a", "\u13f4": "b", "\u13df": "c", "\u13a0": "d", "\u13ac": "e", "\u13c0": "g",
    "\u13bb": "h", "\u13a5": "i", "\u13ab": "j", "\u13e6": "k", "\u13de": "l", "\u13b7": "m",
    "\u13e2": "p", "\u13a1": "r", "\u13d2": "r", "\u13da": "s", "\u13d5": "s", "\u13a2": "t",
    "\u13d9": "v", "\u13b3": "w", "\u13a9": "y", "\u13bd": "y", "\u13c3": "z",
    "0": "o", "1": "l",
}  # fmt: skip
LOOKALIKES = str.maketrans(_CONFUSABLE)


def check_name(name: object) -> str:
    """The display name ``name`` shows as: NFKC, stripped; :class:`InvalidName` if it may not be one."""
    if not isinstance(name, str):
        raise InvalidName(f"a name is text, got {type(name).__name__}")
    for char in name:  # a lone surrogate is text Python holds but no byte string stands for
        if unicodedata.category(char) == "Cs":
            raise InvalidName(f"a name is text UTF-8 can encode, got {char!r}")
    text = unicodedata.normalize("NFKC", name).strip()
    if not text:
        raise InvalidName("a name is not empty")
    if len(text) > MAX_NAME:
        raise InvalidName(f"a name has at most {MAX_NAME} characters, got {len(text)}")
    for char in text:
        category = unicodedata.category(char)
        if category in _REFUSED or (category == "Cf" and char != ZWJ) or char in FILLERS:
            raise InvalidName(f"a name holds no control or invisible characters, got U+{ord(char):04X}")
    stacked = 0
    for char in unicodedata.normalize("NFD", text):  # marks a precomposed letter holds count too
        in_mark = unicodedata.category(char) in _MARKS and char not in _VARIATION
        stacked = stacked + 1 if in_mark else 0
        if stacked > MAX_MARKS:
            raise InvalidName(f"a name stacks at most {MAX_MARKS} combining marks on one character")
    if all(unicodedata.category(char) in _BLANK or char in _VARIATION for char in text):
        raise InvalidName("a name shows at least one visible character")
    return text


def skeleton(name: str) -> str:
    """What ``name`` looks like, for telling whether two names pass for each other (see the module doc)."""
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    folded = folded.translate(LOOKALIKES)
    kept = (c for c in folded if c != ZWJ and c not in _VARIATION and unicodedata.category(c) != "Cf")
    return " ".join("".join(kept).split())


def variants(name: str, rng: random.Random | None = None) -> list[str]:
    """Names like ``name`` (checked by :func:`check_name`) to offer when it is taken: ``name 2`` to
    ``name 5``, then numbers of two and of three or four digits drawn by ``rng``; a long name is cut to
    leave room for the number."""
    draw = rng or random.Random()
    numbers = [2, 3, 4, 5, *draw.sample(range(10, 100), 4), *draw.sample(range(100, 10_000), 4)]
    base = check_name(name)
    out: list[str] = []
    for number in numbers:
        suffix = f" {number}"
        try:
            candidate = check_name(base[: MAX_NAME - len(suffix)].rstrip() + suffix)
        except InvalidName:  # the cut split a character off its marks or joiner
            continue
        if skeleton(candidate) != skeleton(base) and candidate not in out:
            out.append(candidate)
    return out
