"""The player's account: join (``POST /api/players``), ``/api/me``, ``/api/me/stats`` and
``/api/wallet`` with the economy's offer. Every route but the join takes ``Authorization: Bearer
<token>`` and reads the caller's own data only (docs/http-api.md).
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from codemojex import offers, player_stats, players, recovery, rounds, spread, trials, wallet
from codemojex.errors import CodemojexError
from codemojex.keys import ROUND, check_id
from codemojex.rounds import RoundStatus
from codemojex.web import schemas, views
from codemojex.web.auth import PlayerId
from codemojex.web.host import host_of
from codemojex.web.problems import answers

router = APIRouter(prefix="/api")

LEDGER_SHOWN = 200


class NewPlayer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200, description="a display name: 1-32 characters, no control characters")


@router.post(
    "/players",
    status_code=201,
    tags=["players"],
    response_model=schemas.NewPlayerOut,
    responses=answers(400, 409, 413, 422, 429),
)
async def join(request: Request, new: NewPlayer) -> dict[str, Any]:
    """Register a player with the starting grant; the token is shown once (see docs/http-api.md)."""
    host = host_of(request)
    if host.spread is None:
        token = players.new_token()
        player = await players.register(host.game, new.name, token=token)
    else:  # in the partition of the name, with a token minted there (codemojex.spread)
        token = spread.new_token(host.spread, new.name)
        player = await spread.register(host.spread, new.name, token=token)
    game = host.game_of(player.id)
    created = player.created_ms
    code: str | None = None
    with contextlib.suppress(CodemojexError):  # the player exists: a failed code is asked for later
        code = await recovery.issue(game, player.id)
    return {
        "player_id": player.id,
        "name": player.name,
        "token": token,
        "created_ms": created,
        "token_expires_ms": created + game.settings.token_lifetime_ms,
        "expires_unless_played_ms": created + game.settings.trial_ms,
        "recovery_code": code,
    }


@router.get("/me", tags=["players"], response_model=schemas.PlayerOut, responses=answers(401, 404))
async def me(request: Request, player_id: PlayerId) -> dict[str, Any]:
    """The caller; ``expires_unless_played_ms`` is null once an admitted guess keeps them for good."""
    game = host_of(request).game_of(player_id)
    player = await players.get_player(game, player_id)
    ends = await trials.trial_ends(game, player_id)
    return {
        "player_id": player.id,
        "name": player.name,
        "created_ms": player.created_ms,
        "expires_unless_played_ms": ends,
        "has_recovery_code": await recovery.has_code(game, player_id),
    }


@router.get("/me/stats", tags=["players"], response_model=schemas.PlayerStatsOut, responses=answers(401))
async def my_stats(request: Request, player_id: PlayerId) -> dict[str, Any]:
    """The caller's rounds played and solved, best attempts and streaks (codemojex.streaks)."""
    return views.stats_view(
        player_id, await player_stats.read_stats(host_of(request).game_of(player_id), player_id)
    )


@router.get(
    "/wallet", tags=["players"], response_model=schemas.WalletOut, responses=answers(400, 401, 404, 422)
)
async def my_wallet(
    request: Request, player_id: PlayerId, round_id: Annotated[str | None, Query(max_length=64)] = None
) -> dict[str, Any]:
    """Balances, the newest ledger entries (oldest first), the economy's rule, and the offer: in the
    round ``round_id`` (else the open round), what the next guess costs and what the allowance adds."""
    game = host_of(request).game_of(player_id)
    if round_id is not None:
        check_id(round_id, ROUND)
    held = await wallet.read_wallet(game, player_id, ledger_limit=LEDGER_SHOWN)
    now = await rounds.server_ms(game)
    listed = await rounds.list_rounds(game, 50)
    if round_id is not None:
        the_round: rounds.Round | None = await rounds.get_round(game, round_id)
    else:
        the_round = next((r for r in listed if r.status_at(now) is RoundStatus.OPEN), None)
    body = views.wallet_view(held)
    settings = game.settings
    body["economy"] = {
        "allowance": views.amounts_view(settings.allowance),
        "solve_reward": views.amounts_view(settings.solve_reward),
    }
    body["offer"] = None
    if the_round is not None:
        offer = await offers.read_offer(game, the_round.id, player_id)
        scheduled = [r.opens_ms for r in listed if r.status_at(now) is RoundStatus.SCHEDULED]
        body["offer"] = views.offer_view(offer, the_round.status_at(now), min(scheduled, default=None))
    return body
