"""Who is calling: a player (``Authorization: Bearer <token>``) or an operator (the operator token).

A player's token is minted at registration (:func:`codemojex.players.new_token`) and Redis keeps only
its SHA-256, so a leaked database names no usable token; it ends after the token lifetime, and is
rotated or revoked by the player (:mod:`codemojex.tokens`, :mod:`codemojex.web.token_api`). The
operator token is compared in constant time. A missing or unknown token is 401 ``unauthorized``; a
player token on an operator endpoint is 403.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from codemojex import tokens
from codemojex.web.host import host_of
from codemojex.web.problems import Problem

PLAYER_TOKEN = HTTPBearer(
    scheme_name="player",
    description="the token POST /api/players answered (shown once)",
    auto_error=False,
)
OPERATOR_TOKEN = HTTPBearer(
    scheme_name="operator",
    description="the host's operator token (codemojex serve prints where it is)",
    auto_error=False,
)
Declared = HTTPAuthorizationCredentials | None
"""What the schemes give a route: only declared, so the OpenAPI schema names the scheme; the token is
read by :func:`bearer`, one parser for every route."""


def bearer(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer`` header, or None."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def is_operator(request: Request, token: str | None) -> bool:
    expected = host_of(request).config.operator_token
    if not expected or token is None:
        return False
    return secrets.compare_digest(token.encode(), expected.encode())


async def player_of(request: Request, token: str | None) -> str:
    if token is None:
        raise Problem(401, "unauthorized", "send Authorization: Bearer <your player token>")
    player_id = await tokens.authenticate(host_of(request).game_of_token(token), token)
    if player_id is None:
        raise Problem(
            401,
            "unauthorized",
            "that token names no player (expired, revoked or rotated): join again for a new one",
        )
    return player_id


async def current_player(request: Request, _: Annotated[Declared, Security(PLAYER_TOKEN)]) -> str:
    """The calling player's id (a dependency of every player route)."""
    return await player_of(request, bearer(request))


async def require_operator(request: Request, _: Annotated[Declared, Security(OPERATOR_TOKEN)]) -> None:
    """A dependency of every operator route."""
    token = bearer(request)
    if token is None:
        raise Problem(401, "unauthorized", "send Authorization: Bearer <operator token>")
    if not is_operator(request, token):
        raise Problem(403, "forbidden", "this needs the operator token")


async def either_token(
    _player: Annotated[Declared, Security(PLAYER_TOKEN)],
    _operator: Annotated[Declared, Security(OPERATOR_TOKEN)],
) -> None:
    """Declares that a route takes a player's token or the operator's (it reads which itself)."""


PlayerId = Annotated[str, Depends(current_player)]
EitherToken = Depends(either_token)
Operator = Depends(require_operator)
