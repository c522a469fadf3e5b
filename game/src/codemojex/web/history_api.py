"""The rounds' lifecycle for players: the lobby of open rounds, and the history of closed ones.

``GET /api/lobby`` lists every open round with its close time and the server's clock (the page counts
down on it), and the rounds that open later (the schedule's next). ``GET /api/history`` lists the closed
rounds' summaries (:mod:`codemojex.history`), newest close first; ``GET /api/history/{round_id}`` one of
them, with the caller's own guesses while the round's per-guess data is kept (:mod:`codemojex.retention`);
after that the summary alone (the secret, the final top of the board, the counts). Only the token's own
guesses are ever shown: no parameter names a player.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Security

from codemojex import guesses, history, rounds, schedule
from codemojex.errors import UnknownRound
from codemojex.game import translate_errors
from codemojex.keys import ROUND, check_id
from codemojex.rounds import RoundStatus
from codemojex.web import schemas, views
from codemojex.web.auth import PLAYER_TOKEN, Declared, bearer, player_of
from codemojex.web.host import host_of
from codemojex.web.problems import answers

router = APIRouter(prefix="/api")

LOBBY_SCANNED = 50  # the newest rounds the lobby looks at (rounds opened before the live index)
LIVE_SCANNED = 200  # the rounds not concluded yet it looks at, newest opening first
GUESSES_SHOWN = 200


@router.get("/lobby", tags=["rounds"], response_model=schemas.LobbyOut, responses=answers())
async def lobby(request: Request) -> dict[str, Any]:
    """Every open round (newest first) with its close time, the rounds opening later, the server's now."""
    game = host_of(request).game
    now = await rounds.server_ms(game)
    # The rounds not concluded yet, however old (the live index), and the newest (rounds opened before it).
    found = await rounds.live_rounds(game, LIVE_SCANNED) + await rounds.list_rounds(game, LOBBY_SCANNED)
    listed = sorted({r.id: r for r in found}.values(), key=lambda r: (r.opens_ms, r.id), reverse=True)
    return {
        "server_ms": now,
        "rounds": [views.round_view(r, now) for r in listed if r.status_at(now) is RoundStatus.OPEN],
        "upcoming": [views.round_view(r, now) for r in listed if r.status_at(now) is RoundStatus.SCHEDULED][
            ::-1
        ],
    }


@router.get("/history", tags=["rounds"], response_model=schemas.HistoryOut, responses=answers(400, 422))
async def history_list(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    before_ms: Annotated[int | None, Query(ge=0, le=2**53)] = None,
    before_round: Annotated[str | None, Query(max_length=64)] = None,
) -> dict[str, Any]:
    """Closed rounds' summaries, newest close first; the last page's last ``closed_ms`` and ``round_id``
    (``before_ms``, ``before_round``) page back."""
    host = host_of(request)  # a spread game's: the whole game's history (codemojex.spread_upkeep)
    listed = await history.list_history(
        host.game, limit, before_ms, before_round, whole=host.spread is not None
    )
    return {"rounds": [views.summary_view(summary) for summary in listed]}


@router.get(
    "/history/{round_id}",
    tags=["rounds"],
    response_model=schemas.RoundHistoryOut,
    responses=answers(400, 401, 404),
)
async def round_history(
    request: Request, round_id: str, _: Annotated[Declared, Security(PLAYER_TOKEN)]
) -> dict[str, Any]:
    """A closed round: its summary and, with a player's token, that player's own guesses while kept."""
    check_id(round_id, ROUND)
    token = bearer(request)
    game = host_of(request).game
    player_id = await player_of(request, token) if token is not None else None
    summary = await history.read_summary(game, round_id, whole=host_of(request).spread is not None)
    if summary is None:
        raise UnknownRound(f"no closed round {round_id} in the history")
    own = game if player_id is None else host_of(request).game_of(player_id)  # where their guesses are
    with translate_errors():
        kept = await own.redis.zscore(own.keys.retained, round_id) is not None
    settings = await schedule.read_settings(game)
    mine = None
    if player_id is not None:
        listed = await guesses.player_guesses(own, round_id, player_id, GUESSES_SHOWN) if kept else []
        mine = [views.guess_view(guess) for guess in listed]
    return {
        "summary": views.summary_view(summary),
        "guesses_kept": kept,
        "kept_until_ms": summary.closed_ms + int(settings.retention_s * 1000) if kept else None,
        "guesses": mine,
    }
