"""JSON of the game's values, as the API answers them (see docs/http-api.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemojex import hints
from codemojex.engine import Feedback
from codemojex.guesses import PlayerGuess, Submission
from codemojex.history import Summary
from codemojex.leaderboard import Entry
from codemojex.offers import Offer
from codemojex.rounds import Round, RoundStatus
from codemojex.streaks import PlayerStats
from codemojex.wallet import Wallet
from echomq import JobInfo


def round_view(the_round: Round, now_ms: int, secret: tuple[str, ...] | None = None) -> dict[str, Any]:
    status = the_round.status_at(now_ms)
    return {
        "round_id": the_round.id,
        "keyboard": list(the_round.keyboard.keys),
        "length": the_round.length,
        "prices": [{"currency": currency, "amount": amount} for currency, amount in the_round.prices],
        "status": status.value,
        "opens_ms": the_round.opens_ms,
        "closes_ms": the_round.closes_ms,
        "closed_ms": the_round.closed_ms,
        "max_guesses": the_round.max_guesses,
        "server_ms": now_ms,
        "secret": list(secret) if secret is not None and status is RoundStatus.CLOSED else None,
    }


def feedback_view(feedback: Feedback) -> dict[str, Any]:
    return {
        "code": feedback.code(),
        "marks": [mark.value for mark in feedback.marks],
        "hits": feedback.hits,
        "nears": feedback.nears,
        "solved": feedback.solved,
    }


def guess_view(guess: PlayerGuess) -> dict[str, Any]:
    record = guess.record
    return {
        "job_id": guess.job,
        "guess": list(guess.guess),
        "state": guess.state,
        "submitted_ms": guess.submitted_ms,
        "feedback": feedback_view(record.feedback) if record else None,
        "scored_ms": record.scored_ms if record else None,
        "attempt": record.attempt if record else None,
        "counted": record.counted if record else None,
    }


def hints_view(round_id: str, mine: list[PlayerGuess]) -> dict[str, Any]:
    """The keyboard marks and the share grid of the caller's own guesses (codemojex.hints)."""
    records = [guess.record for guess in mine if guess.record is not None]
    marks = hints.key_marks((record.guess, record.feedback) for record in records)
    rows = (hints.ScoredRow(record.feedback, record.attempt) for record in records)
    return {
        "keys": {key: mark.value for key, mark in marks.items()},
        "share": hints.share_grid(round_id, rows),
    }


def stats_view(player_id: str, stats: PlayerStats) -> dict[str, Any]:
    return {
        "player_id": player_id,
        "played": stats.played,
        "solved": stats.solved,
        "best_attempts": stats.best_attempts,
        "current_streak": stats.current_streak,
        "best_streak": stats.best_streak,
    }


def submission_view(submission: Submission) -> dict[str, Any]:
    charged = submission.charged
    return {
        "job_id": submission.job,
        "status": submission.outcome.value,
        "charged": {"currency": charged[0], "amount": charged[1]} if charged else None,
        "guess": list(submission.guess or ()),
    }


def entry_view(entry: Entry) -> dict[str, Any]:
    standing = entry.standing
    return {
        "rank": entry.rank,
        "player_id": standing.player,
        "name": entry.name,
        "solved": standing.solved,
        "hits": standing.best_hits,
        "nears": standing.best_nears,
        "attempts": standing.attempts,
        "best_at_ms": standing.best_at_ms,
    }


def wallet_view(wallet: Wallet) -> dict[str, Any]:
    return {
        "player_id": wallet.player,
        "balances": wallet.balances,
        "ledger": [
            {
                "at_ms": entry.at_ms,
                "currency": entry.currency,
                "delta": entry.delta,
                "balance": entry.balance,
                "reason": entry.reason,
                "job_id": entry.job or None,
            }
            for entry in wallet.ledger
        ],
        "ledger_total": wallet.ledger_total,
    }


def amounts_view(amounts: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"currency": currency, "amount": amount} for currency, amount in amounts]


def offer_view(offer: Offer, status: RoundStatus, next_opens_ms: int | None) -> dict[str, Any]:
    """What the player's wallet offers in a round (:class:`codemojex.offers.Offer`)."""
    price = offer.next_price
    return {
        "round_id": offer.round,
        "round_status": status.value,
        "allowance_taken": offer.taken,
        "top_up": amounts_view(offer.top_up),
        "next_price": None if price is None else {"currency": price[0], "amount": price[1]},
        "rewarded": offer.rewarded,
        "next_round": {"top_up": amounts_view(offer.next_round_top_up), "opens_ms": next_opens_ms},
    }


def job_view(
    info: JobInfo, *, guess_id: str, scored_count: int, now_ms: int, operator: bool = False
) -> dict[str, Any]:
    """A job's row; ``owner`` (the claiming worker's ``hostname:pid``) only for the operator, else null."""
    return {
        "job_id": info.job,
        "state": info.state.value,
        "lane": info.lane,
        "location": info.location,
        "attempts": info.attempts,
        "tries": info.tries,
        "max_attempts": info.max_attempts,
        "deadline_ms": info.deadline_ms if info.state.value == "active" else None,
        "finished_ms": info.finished_ms,
        "owner": info.owner if operator else None,
        "error": info.error,
        "trimmed": info.trimmed,
        "guess_id": guess_id,
        "scored_count": scored_count,
        "server_ms": now_ms,
    }


def summary_view(summary: Summary) -> dict[str, Any]:
    """A closed round's summary: its secret, the top of its final board, counts and times."""
    return {
        "round_id": summary.round_id,
        "keyboard": list(summary.keyboard),
        "secret": list(summary.secret) if summary.secret is not None else None,
        "opens_ms": summary.opens_ms,
        "closes_ms": summary.closes_ms,
        "closed_ms": summary.closed_ms,
        "players": summary.players,
        "guesses": summary.guesses,
        "winners": [
            {
                "rank": winner.rank,
                "player_id": winner.standing.player,
                "name": winner.name,
                "solved": winner.standing.solved,
                "hits": winner.standing.best_hits,
                "nears": winner.standing.best_nears,
                "attempts": winner.standing.attempts,
                "best_at_ms": winner.standing.best_at_ms,
            }
            for winner in summary.board
        ],
    }
