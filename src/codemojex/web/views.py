"""JSON of the game's values, as the API answers them (see docs/http-api.md)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codemojex.engine import Feedback
from codemojex.guesses import PlayerGuess, Submission
from codemojex.leaderboard import Entry
from codemojex.offers import Offer
from codemojex.rounds import Round, RoundStatus
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
