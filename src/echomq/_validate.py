"""Checks shared by every entry point: a value of the wrong type or range is an InvalidOption."""

from __future__ import annotations

from echomq.errors import InvalidOption


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
