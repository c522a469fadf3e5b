"""Checks shared by every entry point: a value of the wrong type or range is an InvalidOption."""

from __future__ import annotations

from echomq.errors import InvalidInput, InvalidOption


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """Return ``value`` if it is an int (not a bool) in ``[low, high]``, else raise InvalidOption."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"from {low} to {high}" if high is not None else f">= {low}"
        raise InvalidOption(f"{name} is an int {bound}, got {value!r}")
    return value


def check_utf8(name: str, text: str, error: type[InvalidInput] = InvalidOption) -> str:
    """Return ``text`` if UTF-8 can encode it (Redis gets its bytes), else raise ``error``: a lone
    surrogate such as ``"\\ud800"`` is a str Python holds but no byte string stands for."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            f"{name} is text UTF-8 can encode, got {text[exc.start : exc.end]!r} at {exc.start}"
        ) from None
    return text
