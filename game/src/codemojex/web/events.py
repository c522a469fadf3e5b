"""Server-sent events: a player's guesses being scored, and leaderboard changes, live.

A browser's ``EventSource`` sends no headers, so the stream is opened with a ticket, never with the
player's long-lived token in the URL (where logs and histories keep it):

1. ``POST /api/events/ticket`` ``{"round_id": ...}`` with ``Authorization: Bearer <token>`` answers a
   random ticket, stored in Redis (``cmx:{t}:ticket:<sha256>``, only its digest) bound to that player and
   round and to the digest of the token that asked, for :attr:`~codemojex.web.admission.Limits.ticket_ttl_s`
   seconds;
2. ``GET /api/events?ticket=...`` takes it (``GETDEL``: a ticket opens one stream, once) and streams,
   if the token that asked for it still names the player: a logout or a rotation voids the tickets the
   old token asked for (a thief's included).

A client that can send headers may instead ``GET /api/events?round_id=...`` with its bearer token. A
``token`` in the query is refused (400 ``token_in_url``); an unknown, used or expired ticket is 401
``invalid_ticket``; a closed round is 409 ``round_closed``; over a stream cap, 429 ``too_many_streams``.

The stream (``text/event-stream`` framed by ``sse-starlette``) subscribes the caller to the round on the
host's :class:`~codemojex.web.hub.Hub`: ``hello``, then ``scored``, ``leaderboard``, ``solved`` (a
player solved the round), ``resync`` and, when the round closes, ``closed`` with the round's summary and
winners (the stream then ends); when the token it was opened with no longer names the player (a logout,
a rotation), ``revoked`` (the stream then ends: :mod:`codemojex.web.hub`); with a ping comment when the
round is quiet. A client that does not read for
:attr:`~codemojex.web.admission.Limits.stream_send_timeout_s` is ended.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Security
from pydantic import BaseModel, ConfigDict
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.background import BackgroundTask

from codemojex import rounds, tokens
from codemojex.errors import RoundClosed
from codemojex.game import translate_errors
from codemojex.keys import ROUND, check_id
from codemojex.players import token_digest
from codemojex.rounds import RoundStatus
from codemojex.web import schemas
from codemojex.web.auth import PLAYER_TOKEN, PlayerId, bearer, player_of
from codemojex.web.buckets import digest
from codemojex.web.host import Host, host_of
from codemojex.web.problems import Problem, answers
from codemojex.web.subscribers import TooManyStreams

PING_S = 15.0
_TICKET = re.compile(r"[A-Za-z0-9_-]{20,64}")

router = APIRouter(prefix="/api")


class TicketRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    round_id: str


async def _open_round(host: Host, round_id: str) -> None:
    """404 / 400 for no such round, 409 ``round_closed`` for a closed one."""
    the_round = await rounds.get_round(host.game, round_id)
    if the_round.status_at(await rounds.server_ms(host.game)) is RoundStatus.CLOSED:
        raise RoundClosed(f"round {round_id} is closed: it has no more events")


@router.post(
    "/events/ticket",
    status_code=201,
    tags=["events"],
    response_model=schemas.TicketOut,
    responses=answers(400, 401, 404, 409, 413),
)
async def ticket(request: Request, new: TicketRequest, player_id: PlayerId) -> dict[str, Any]:
    """A one-use ticket for ``GET /api/events?ticket=...``, valid for a few seconds."""
    host = host_of(request)
    check_id(new.round_id, ROUND)
    await _open_round(host, new.round_id)
    value = secrets.token_urlsafe(24)
    ttl = host.config.limits.ticket_ttl_s
    with translate_errors():
        bound = f"{player_id} {new.round_id} {token_digest(bearer(request) or '')}"
        await host.game.redis.set(host.game.keys.ticket(digest(value)), bound, ex=ttl)
    return {"ticket": value, "round_id": new.round_id, "expires_in_s": ttl}


async def _redeem(host: Host, value: str) -> tuple[str, str, str | None]:
    if not _TICKET.fullmatch(value):
        raise Problem(401, "invalid_ticket", "that is not a ticket: ask POST /api/events/ticket")
    with translate_errors():
        stored = await host.game.redis.getdel(host.game.keys.ticket(digest(value)))
    if stored is None:
        raise Problem(401, "invalid_ticket", "the ticket is unknown, used or expired: ask for a new one")
    player_id, round_id, *asked_by = stored.decode().split(" ")
    if asked_by and await tokens.holder(host.game_of_digest(asked_by[0]), asked_by[0]) != player_id:
        raise Problem(401, "invalid_ticket", "the token that asked for this ticket was revoked or rotated")
    return player_id, round_id, asked_by[0] if asked_by else None


def _sse(kind: str, data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data, ensure_ascii=False), event=kind)


@router.get(
    "/events",
    tags=["events"],
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **answers(400, 401, 404, 409)},
    dependencies=[Security(PLAYER_TOKEN)],  # or a ticket: declared, read by the route
)
async def events(
    request: Request,
    ticket: Annotated[str | None, Query(description="from POST /api/events/ticket (used once)")] = None,
    round_id: Annotated[str | None, Query(description="the round, with an Authorization header")] = None,
) -> EventSourceResponse:
    """A ``text/event-stream`` of the caller's scored guesses and the round's leaderboard."""
    if "token" in request.query_params:
        raise Problem(400, "token_in_url", "a player token is never taken in a URL: use a ticket")
    host = host_of(request)
    if ticket is not None:
        player_id, ticket_round, opened_with = await _redeem(host, ticket)
        if round_id is not None and round_id != ticket_round:
            raise Problem(400, "ticket_mismatch", "that ticket is for another round")
        round_id = ticket_round
    elif round_id is None:
        raise Problem(422, "malformed_body", "give ticket=... (or round_id=... with a bearer token)")
    else:
        player_id = await player_of(request, bearer(request))
        opened_with = token_digest(bearer(request) or "")
    await _open_round(host, round_id)
    address = getattr(request.state, "client_address", "")
    try:
        subscriber = await host.hub.subscribe(round_id, player_id, address, opened_with)
    except TooManyStreams as exc:
        raise Problem(429, "too_many_streams", str(exc)) from None

    async def stream() -> AsyncIterator[ServerSentEvent]:
        try:
            yield _sse("hello", {"round_id": round_id, "player_id": player_id})
            while (item := await subscriber.queue.get()) is not None:
                yield _sse(*item)
        finally:
            host.hub.unsubscribe(subscriber)

    return EventSourceResponse(
        stream(),
        ping=PING_S,
        send_timeout=host.config.limits.stream_send_timeout_s,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        background=BackgroundTask(host.hub.unsubscribe, subscriber),  # if the stream never started
    )
