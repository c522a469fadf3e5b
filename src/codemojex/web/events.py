"""Server-sent events: a player's guesses being scored, and leaderboard changes, live.

``GET /api/events`` subscribes the caller to the round on the host's :class:`~codemojex.web.hub.Hub`
and streams what it fans out (``scored``, ``leaderboard``, ``resync``) as ``text/event-stream``, with a
ping comment when the round is quiet.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from codemojex import rounds
from codemojex.web.auth import bearer, player_of
from codemojex.web.host import host_of

PING_S = 15.0


def frame(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


router = APIRouter(prefix="/api")


@router.get("/events", tags=["events"], response_class=StreamingResponse)
async def events(
    request: Request,
    round_id: Annotated[str, Query(description="the round to follow")],
    token: Annotated[str | None, Query(description="the player token (EventSource sends no headers)")] = None,
) -> StreamingResponse:
    """A ``text/event-stream`` of the caller's scored guesses and the round's leaderboard."""
    player_id = await player_of(request, token or bearer(request))
    host = host_of(request)
    await rounds.get_round(host.game, round_id)  # 400 / 404 before the stream starts
    subscriber = host.hub.subscribe(round_id, player_id)

    async def stream() -> AsyncIterator[str]:
        try:
            yield frame("hello", {"round_id": round_id, "player_id": player_id})
            while True:
                try:
                    item = await asyncio.wait_for(subscriber.queue.get(), PING_S)
                except TimeoutError:
                    yield ": ping\n\n"
                    continue
                if item is None:
                    return
                yield frame(*item)
        finally:
            host.hub.unsubscribe(subscriber)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)
