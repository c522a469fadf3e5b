"""The argument types of the ``codemojex`` command line: each rejects ill-formed input (exit code 2, with the
reason) before anything touches Redis; and the bus settings the worker's options give (:func:`bus_settings`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from codemojex.engine import LENGTH
from codemojex.errors import InvalidInput
from codemojex.game import check_amount, check_currency
from codemojex.keys import check_id
from echomq import Settings


def id_type(brand: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check_id(text, brand)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = f"{brand} id"
    return parse


def position(text: str) -> int:
    """A 1-based position of the code, 1 to 6."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= LENGTH:
        raise argparse.ArgumentTypeError(f"a position is a whole number from 1 to {LENGTH}, got {text!r}")
    return value


def count(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            bound = f">= {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"expected a whole number {bound}, got {text!r}")
        return value

    parse.__name__ = "count"
    return parse


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 to 65535, got {text!r}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def price(text: str) -> tuple[str, int]:
    """``CURRENCY=AMOUNT``, e.g. ``ticket=1``."""
    currency, sep, amount = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"a price is CURRENCY=AMOUNT (e.g. ticket=1), got {text!r}")
    try:
        value = int(amount)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a price's amount is a whole number, got {amount!r}") from None
    try:
        return check_currency(currency), check_amount("a price's amount", value)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def bus_settings(args: argparse.Namespace) -> Settings | None:
    """The bus's retention as the worker's options give it (the proof's demo worker: ``codemojex.proof``'s
    ``DEMO_BUS``) and ``--wait-replicas`` (durable admission of ``guess``), or None: the library's
    defaults."""
    names = ("result_ttl_ms", "dedup_window_ms", "dead_ttl_ms", "wait_replicas")
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return Settings(**given) if given else None
