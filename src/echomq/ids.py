"""Branded, sortable ids: ``JOB``, ``PLR``, ``GES``, ``RND`` and any other 3-letter brand.

An id is a brand of three upper-case ASCII letters and a 14-byte body: 6 bytes of big-endian Unix
milliseconds, then 8 bytes of entropy. The entropy is fresh random at each new millisecond and +1 within
the same millisecond, so one process mints strictly increasing ids (thread-safe). If the wall clock steps
back, minting keeps the last millisecond it used, so ids stay increasing.

The text form is the brand followed by the body as 23 Crockford base32 digits (the 112-bit body,
zero-padded on the left to 115 bits). Crockford's alphabet sorts like ASCII, so for one brand
**mint order is byte order is sort order** of the text, which is what lets a Redis sorted set order a
lane by id alone. Parsing is strict: wrong brand, length, alphabet or case raises :class:`InvalidId`.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

from echomq.errors import InvalidId

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
BODY_BYTES = 14
BODY_CHARS = 23  # ceil(112 / 5)
TEXT_LENGTH = 3 + BODY_CHARS
_TIME_BYTES = 6
_ENTROPY_BITS = 64
_ENTROPY_MASK = (1 << _ENTROPY_BITS) - 1
_MAX_MS = (1 << 48) - 1

_BRAND = re.compile(r"[A-Z]{3}")
# 23 digits carry 115 bits: the first digit holds the 3 zero padding bits and the top 2 body bits,
# so it is 0-3 (a first digit of 4-7 would encode a body of more than 14 bytes).
_TEXT = re.compile(r"([A-Z]{3})([0-3][0-9A-HJKMNP-TV-Z]{22})")
_DECODE = {c: i for i, c in enumerate(ALPHABET)}


def _encode(value: int) -> str:
    digits = []
    for _ in range(BODY_CHARS):
        digits.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(digits))


def _decode(text: str) -> int:
    value = 0
    for char in text:
        value = (value << 5) | _DECODE[char]
    return value


def check_brand(brand: object) -> str:
    """Return ``brand`` if it is three upper-case ASCII letters, else raise :class:`InvalidId`."""
    if not isinstance(brand, str) or not _BRAND.fullmatch(brand):
        raise InvalidId(f"a brand is three upper-case letters A-Z, got {brand!r}")
    return brand


# A test hook (echomq.worker.faults): this process's wall clock shifted, as a skewed machine's would be.
_SKEW_MS = int(os.environ.get("ECHOMQ_CLOCK_SKEW_MS") or 0)


def _now_ms() -> int:
    """This process's wall clock in ms, as ids are minted by it (the skew hook included)."""
    return time.time_ns() // 1_000_000 + _SKEW_MS


class _Minter:
    """Monotonic minting state, shared by every thread of the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._entropy = 0

    def next_body(self) -> bytes:
        with self._lock:
            now = _now_ms()
            if now > self._last_ms:
                self._last_ms = now
                self._entropy = secrets.randbits(_ENTROPY_BITS - 1)  # headroom for +1 steps
            else:
                self._entropy += 1
                if self._entropy > _ENTROPY_MASK:  # 2**63 mints in one ms: borrow the next ms
                    self._last_ms += 1
                    self._entropy = secrets.randbits(_ENTROPY_BITS - 1)
            if self._last_ms > _MAX_MS:
                raise InvalidId("the clock is past the 48-bit millisecond range of ids")
            return self._last_ms.to_bytes(_TIME_BYTES, "big") + self._entropy.to_bytes(8, "big")


_MINTER = _Minter()


def mint(brand: str) -> str:
    """Mint a new id of ``brand``; later mints in this process sort after earlier ones."""
    return from_body(brand, _MINTER.next_body())


def from_body(brand: str, body_bytes: object) -> str:
    """Build the text id of ``brand`` over a 14-byte ``body_bytes``."""
    brand = check_brand(brand)
    if not isinstance(body_bytes, bytes) or len(body_bytes) != BODY_BYTES:
        raise InvalidId(f"an id body is {BODY_BYTES} bytes")
    return brand + _encode(int.from_bytes(body_bytes, "big"))


def parse(text: object, brand: str | None = None) -> tuple[str, bytes]:
    """Split a text id into ``(brand, body)``; raise :class:`InvalidId` if it is ill-formed.

    With ``brand`` given, an id of any other brand is refused too.
    """
    match = _match(text, brand)
    return match.group(1), _decode(match.group(2)).to_bytes(BODY_BYTES, "big")


def _match(text: object, brand: str | None) -> re.Match[str]:
    """The match of a well-formed id (of ``brand``, when given); else raise :class:`InvalidId`."""
    if not isinstance(text, str):
        raise InvalidId(f"an id is a str, got {type(text).__name__}")
    match = _TEXT.fullmatch(text)
    if match is None:
        shown = text if len(text) <= 40 else text[:40] + "..."
        raise InvalidId(
            f"ill-formed id {shown!r}: expected a 3-letter brand and {BODY_CHARS} upper-case "
            "Crockford base32 digits"
        )
    found = match.group(1)
    if brand is not None and found != check_brand(brand):
        raise InvalidId(f"expected a {brand} id, got a {found} id")
    return match


def check(text: object, brand: str | None = None) -> str:
    """Return ``text`` unchanged if it is a well-formed id (of ``brand``, when given); the pattern is the
    whole rule, so no body is decoded (every key builder and admission calls this)."""
    _match(text, brand)
    assert isinstance(text, str)
    return text


def is_valid(text: object, brand: str | None = None) -> bool:
    """True when ``text`` is a well-formed id (of ``brand``, when given)."""
    try:
        parse(text, brand)
    except InvalidId:
        return False
    return True


def brand_of(text: str) -> str:
    """The brand of a well-formed id."""
    return parse(text)[0]


def body(text: str) -> bytes:
    """The 14-byte body of a well-formed id."""
    return parse(text)[1]


def rebrand(text: str, brand: str) -> str:
    """The same body under another brand: a job's guess record is ``rebrand(job, "GES")``."""
    return from_body(brand, body(text))


def timestamp_ms(text: str) -> int:
    """The Unix milliseconds at which the id was minted."""
    return int.from_bytes(body(text)[:_TIME_BYTES], "big")


def check_recent(text: str, span_ms: int) -> str:
    """Return ``text`` if its mint time is within ``span_ms`` of this process's clock, before or after,
    else raise :class:`InvalidId` (an admission's check: see :func:`echomq.jobs.enqueue_call`)."""
    minted = timestamp_ms(text)
    now = _now_ms()
    if abs(now - minted) > span_ms:
        when = "ago" if minted < now else "ahead"
        raise InvalidId(
            f"{text} was minted {abs(now - minted) / 3_600_000:.1f} h {when}; an id is admitted within "
            f"{span_ms / 3_600_000:g} h of its mint time: mint a new one"
        )
    return text
