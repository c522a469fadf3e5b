"""The request body limit: an ASGI middleware answering 413 ``body_too_large`` before a route reads a
body over the limit, whether the client declared its length or streams it in chunks."""

from __future__ import annotations

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
