"""Recovery codes over HTTP: get a new one (``POST /api/me/recovery``, bearer token) and trade one for
a token on another device (``POST /api/recover``); see :mod:`codemojex.recovery`.

``POST /api/recover`` takes no token. A wrong code, a code with a wrong name and an unknown player are
one answer, 401 ``bad_recovery_code``; text that cannot be a code is 400 ``invalid_option`` (no secret
is involved in telling that). The lookup is by the code's digest, so no secret is compared byte by
byte. It is rate-limited per address in its own class (``recover``, :mod:`codemojex.web.admission`),
which fails closed. A lost reply: the retry signs in again and gets another token (the first one,
held by nobody, is one of the player's bounded sessions and ends with its lifetime).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from codemojex import players, recovery
from codemojex.web import schemas
from codemojex.web.auth import PlayerId
from codemojex.web.host import host_of
from codemojex.web.problems import Problem, answers

router = APIRouter(prefix="/api")

BAD_CODE = (
    "that recovery code (with that name) names no player: check it, or ask for a new one on a device"
    " still signed in"
)


class Recover(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(max_length=64, description="the recovery code (case, spaces and dashes do not matter)")
    name: str | None = Field(
        default=None, max_length=200, description="optional: the player's name, checked against the code"
    )
    sign_out_others: bool = Field(default=False, description="revoke every other token of the player")


@router.post(
    "/me/recovery",
    tags=["players"],
    response_model=schemas.RecoveryOut,
    responses=answers(401, 404),
)
async def new_recovery_code(request: Request, player_id: PlayerId) -> dict[str, Any]:
    """A new recovery code for the caller, shown once; the old code stops working."""
    code = await recovery.issue(host_of(request).game_of(player_id), player_id)
    return {"player_id": player_id, "recovery_code": code}


@router.post(
    "/recover",
    tags=["players"],
    response_model=schemas.RecoveredOut,
    responses=answers(400, 401, 413),
)
async def recover(request: Request, body: Recover) -> dict[str, Any]:
    """Trade a recovery code (and, optionally, the player's name) for a new token; the player's other
    tokens stay valid unless ``sign_out_others``."""
    game = host_of(request).game_of_code(body.code)  # InvalidOption: not a code
    signed = await recovery.sign_in(
        game, body.code, name=body.name or None, everywhere_else=body.sign_out_others
    )
    if signed is None:
        raise Problem(401, "bad_recovery_code", BAD_CODE)
    player = await players.get_player(game, signed.player_id)
    return {
        "player_id": signed.player_id,
        "name": player.name,
        "token": signed.token,
        "token_expires_ms": signed.expires_ms,
    }
