"""The events the hub (:mod:`codemojex.web.hub`) sends a stream, built from what Redis holds: a scored
guess (to its own player only), the board, a new solver's notice (name, attempts and rank, nothing of
the guess) and a concluded round's ``closed`` summary. Pure: no Redis, no subscribers."""

from __future__ import annotations

from codemojex import history, leaderboard
from codemojex.web import views
from codemojex.web.subscribers import Event


def closed_event(summary: history.Summary) -> Event:
    """The ``closed`` event of a concluded round: its summary (secret, winners, counts)."""
    return ("closed", views.summary_view(summary))


def scored_event(round_id: str, fields: dict[bytes, bytes]) -> Event:
    """The ``scored`` event of a stream entry ``score.lua`` wrote (kind ``scored``)."""
    return (
        "scored",
        {
            "round_id": round_id,
            "job_id": fields.get(b"job", b"").decode(),
            "guess_id": fields[b"guess"].decode(),
            "code": fields[b"code"].decode(),
            "solved": fields.get(b"solved") == b"true",
        },
    )


def board_event(round_id: str, entries: list[leaderboard.Entry]) -> Event:
    return ("leaderboard", {"round_id": round_id, "entries": [views.entry_view(e) for e in entries]})


def solved_event(round_id: str, player: str, attempts: int, entry: leaderboard.Entry | None) -> Event:
    """A new solver's notice; ``entry`` is their board entry (None: past the board read)."""
    return (
        "solved",
        {
            "round_id": round_id,
            "player_id": player,
            "name": entry.name if entry else "?",
            "attempts": entry.standing.attempts if entry else attempts,
            "rank": entry.rank if entry else None,
        },
    )
