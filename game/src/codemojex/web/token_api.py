"""The player's token: rotate it (``POST /api/me/token``) or revoke it, i.e. log out
(``DELETE /api/me/token``); see :mod:`codemojex.tokens` for the lifetime and the storage.

Rotation takes the current token as ``Authorization: Bearer`` and answers a new one; the old one is
refused from then on. Its reply lost, the client sends the same request again with the old token: for
:data:`codemojex.tokens.REPLAY_MS` that answers the same new token (never a second one, never a 401
that would lock the player out). Both answer 401 ``unauthorized`` for a token that names nobody.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Security

from codemojex import tokens
from codemojex.web import schemas
from codemojex.web.auth import PLAYER_TOKEN, bearer
from codemojex.web.host import host_of
from codemojex.web.problems import Problem, answers

router = APIRouter(prefix="/api")


def _token(request: Request) -> str:
    token = bearer(request)
    if token is None:
        raise Problem(401, "unauthorized", "send Authorization: Bearer <your player token>")
    return token


@router.post(
    "/me/token",
    tags=["players"],
    response_model=schemas.TokenOut,
    responses=answers(401),
    dependencies=[Security(PLAYER_TOKEN)],
)
async def rotate_token(request: Request) -> dict[str, Any]:
    """A new token for the caller, the presented one revoked in the same step; a retry with the old
    token (lost reply) answers the same new token."""
    token = _token(request)
    issued = await tokens.rotate(host_of(request).game_of_token(token), token)
    if issued is None:
        raise Problem(401, "unauthorized", "that token names no player (expired, revoked or rotated)")
    return {"player_id": issued.player_id, "token": issued.token, "token_expires_ms": issued.expires_ms}


@router.delete(
    "/me/token",
    tags=["players"],
    response_model=schemas.RevokedOut,
    responses=answers(401),
    dependencies=[Security(PLAYER_TOKEN)],
)
async def revoke_token(request: Request) -> dict[str, Any]:
    """Log out: the presented token names nobody from now on."""
    token = _token(request)
    player_id = await tokens.revoke(host_of(request).game_of_token(token), token)
    if player_id is None:
        raise Problem(401, "unauthorized", "that token names no player (expired, revoked or rotated)")
    return {"player_id": player_id, "revoked": True}
