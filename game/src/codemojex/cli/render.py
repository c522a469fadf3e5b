"""What ``codemojex`` commands print: the readable form (aligned tables and fields that count an emoji as
two columns, feedback squares, UTC times, prices and charges) and the JSON shapes of rounds, feedback,
submissions and locks that ``--json`` prints instead.
"""

from __future__ import annotations

import argparse
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from codemojex import rounds
from codemojex.emoji import graphemes, is_emoji
from codemojex.engine import Feedback, Mark
from codemojex.game import Prices
from codemojex.guesses import GuessRecord, Submission

SQUARES = {Mark.HIT: "🟩", Mark.NEAR: "🟨", Mark.MISS: "⬜"}


# ---- readable output ----


def _width(text: str) -> int:
    """The columns ``text`` takes in a terminal: an emoji takes two, combining marks none."""
    total = 0
    for cluster in graphemes(text):
        if is_emoji(cluster):
            total += 2
            continue
        for char in cluster:
            if unicodedata.combining(char) or unicodedata.category(char) in {"Mn", "Me", "Cf"}:
                continue
            total += 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1
    return total


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Aligned columns, two spaces apart; the last column is not padded."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(_width(row[col]) for row in cells) for col in range(len(headers))]
    return [
        "  ".join(_pad(cell, widths[col]) if col < len(row) - 1 else cell for col, cell in enumerate(row))
        for row in cells
    ]


def fields(pairs: Sequence[tuple[str, object]]) -> list[str]:
    """``label  value`` lines with the labels aligned."""
    width = max(len(label) for label, _ in pairs)
    return [f"{label:<{width}}  {value}" for label, value in pairs]


def time_text(ms: int | None, absent: str = "-") -> str:
    if ms is None:
        return absent
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def keys_text(keys: Sequence[str]) -> str:
    return " ".join(keys)


def prices_text(prices: Prices) -> str:
    return ", ".join(f"{currency}={amount}" for currency, amount in prices)


def charge_text(charge: tuple[str, int] | None) -> str:
    return "nothing" if charge is None else f"{charge[1]} {charge[0]}"


def squares(feedback: Feedback) -> str:
    return " ".join(SQUARES[mark] for mark in feedback.marks)


def round_lines(data: dict[str, Any], the_round: rounds.Round) -> list[str]:
    pairs: list[tuple[str, object]] = [
        ("round", the_round.id),
        ("status", data["status"]),
        ("keyboard", keys_text(the_round.keyboard.keys)),
        ("prices", prices_text(the_round.prices) + "  (the first the wallet can pay)"),
        ("opens", time_text(the_round.opens_ms)),
        ("closes", time_text(the_round.closes_ms, "when closed")),
    ]
    if the_round.closed_ms is not None:
        pairs.append(("closed", time_text(the_round.closed_ms)))
    pairs.append(("max guesses", the_round.max_guesses or "no limit"))
    if "players" in data:
        pairs.append(("players", data["players"]))
    if "secret" in data:
        shown = keys_text(data["secret"]) if data["secret"] is not None else "(revealed after the close)"
        pairs.append(("secret", shown))
    return fields(pairs)


def feedback_lines(guess: Sequence[str], record: GuessRecord) -> list[str]:
    feedback = record.feedback
    verdict = "solved!" if feedback.solved else f"hits {feedback.hits}  nears {feedback.nears}"
    counted = f"attempt {record.attempt}" if record.counted else "not counted (after the solve)"
    return [f"  {keys_text(guess)}", f"  {squares(feedback)}", f"  {verdict}  ({counted})"]


def positions_text(positions: dict[int, str]) -> str:
    return "  ".join(f"{position + 1}={key}" for position, key in positions.items()) or "none"


# ---- JSON shapes ----


def _prices_json(prices: Prices) -> list[dict[str, Any]]:
    return [{"currency": currency, "amount": amount} for currency, amount in prices]


def charge_json(charge: tuple[str, int] | None) -> dict[str, Any] | None:
    return None if charge is None else {"currency": charge[0], "amount": charge[1]}


def round_json(the_round: rounds.Round, now_ms: int) -> dict[str, Any]:
    return {
        "id": the_round.id,
        "status": the_round.status_at(now_ms).value,
        "keyboard": list(the_round.keyboard.keys),
        "length": the_round.length,
        "prices": _prices_json(the_round.prices),
        "created_ms": the_round.created_ms,
        "opens_ms": the_round.opens_ms,
        "closes_ms": the_round.closes_ms,
        "closed_ms": the_round.closed_ms,
        "max_guesses": the_round.max_guesses,
        "now_ms": now_ms,
    }


def feedback_json(record: GuessRecord) -> dict[str, Any]:
    feedback = record.feedback
    return {
        "guess_id": record.id,
        "code": feedback.code(),
        "marks": [mark.value for mark in feedback.marks],
        "hits": feedback.hits,
        "nears": feedback.nears,
        "misses": feedback.misses,
        "solved": feedback.solved,
        "attempt": record.attempt,
        "counted": record.counted,
        "scored_ms": record.scored_ms,
    }


def submission_json(sub: Submission, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "outcome": sub.outcome.value,
        "round": args.round,
        "player": args.player,
        "job": sub.job,
        "guess": None if sub.guess is None else list(sub.guess),
        "charged": charge_json(sub.charged),
        "refusal": None if sub.refusal is None else sub.refusal.value,
        "problem": sub.problem or None,
        "detail": sub.detail or None,
        "state": None,  # with --wait: scored, or the job's state when the wait ended
        "feedback": None,  # with --wait: the feedback once scored
    }


def positions_json(positions: dict[int, str]) -> dict[str, str]:
    return {str(position + 1): key for position, key in positions.items()}
