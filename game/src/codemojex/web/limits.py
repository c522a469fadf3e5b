"""The request body's limits: an ASGI middleware answering 413 ``body_too_large`` before a route reads a
body over the limit, whether the client declared its length or streams it in chunks; and, for
:mod:`codemojex.web.admission`, the time a body may take to arrive (:func:`timed`, 408) and the body
read ahead before a request takes a slot (:func:`read_ahead`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemojex.web.problems import body


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a streamed body passes the limit; FastAPI re-raises an HTTPException
    from body reading, and the app's handler answers it as 413 ``body_too_large``."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"a request body is at most {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, send: Send) -> None:
        payload: dict[str, Any] = body(413, "body_too_large", f"a request body is at most {self.limit} bytes")
        data = json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})


class BodyTimeout(HTTPException):
    """Raised from ``receive`` when the body has not arrived in time (408 ``request_timeout``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"the request body did not arrive within {seconds:g} s")


class Replay:
    """A ``receive`` that replays the messages read ahead, then reads on; :attr:`body` is the whole body
    when it was read ahead whole (None when it was not: none declared, too large, or not in time)."""

    __slots__ = ("body", "read", "receive")

    def __init__(self, receive: Receive, read: list[Message], *, complete: bool) -> None:
        self.receive = receive
        self.read = read
        self.body = b"".join(m.get("body", b"") for m in read) if complete else None

    async def __call__(self) -> Message:
        return self.read.pop(0) if self.read else await self.receive()


async def read_ahead(scope: Scope, timed: Receive, limit: int) -> Replay:
    """A ``receive`` that replays the request's body, read here first through ``timed`` (up to ``limit``
    bytes: past it, or over a declared length past it, the rest is left to :class:`BodyLimit`'s 413).
    A body that does not arrive in time is left to the route as before: reading it raises
    :class:`BodyTimeout` (408), a route that reads no body is not refused."""
    headers = dict(scope["headers"])
    declared = headers.get(b"content-length")
    if declared is None and b"transfer-encoding" not in headers:
        return Replay(timed, [], complete=False)  # no body
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return Replay(timed, [], complete=False)  # refused whole by BodyLimit, unread
    read: list[Message] = []
    size = 0
    complete = False
    while True:
        try:
            message = await timed()
        except BodyTimeout:
            break  # the replay's next read raises it again, for the route
        read.append(message)
        size += len(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body", False):
            complete = message["type"] == "http.request" and size <= limit
            break
        if size > limit:
            break
    return Replay(timed, read, complete=complete)


def timed(receive: Receive, seconds: float) -> Receive:
    """``receive`` bounded: the whole body within ``seconds`` of the first read, else :class:`BodyTimeout`."""
    done = False
    deadline: float | None = None

    async def timed_receive() -> Message:
        nonlocal done, deadline
        if done:  # the body is in: what follows is the wait for a disconnect
            return await receive()
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + seconds  # for the whole body, not each chunk
        try:
            async with asyncio.timeout_at(deadline):  # no task per read, as wait_for would make
                message = await receive()
        except TimeoutError:
            raise BodyTimeout(seconds) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            done = True
        return message

    return timed_receive
