"""The harness's HTTP players: a bare keep-alive HTTP/1.1 client on asyncio streams (no client library
in the package's dependencies), reconnecting after any failure, as a browser or a mobile app would."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any


class HttpPlayer:
    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(
        self, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        """Status and JSON body; raises ``OSError`` / ``asyncio.IncompleteReadError`` / ``TimeoutError``
        when the connection fails (the next call reconnects)."""
        return await self.request("POST", path, body, headers)

    async def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        data = b"" if body is None else json.dumps(body).encode()
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            f"Authorization: Bearer {self.token}",
        ]
        head += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode() + data
        try:
            if self._streams is None:
                self._streams = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 5)
            reader, writer = self._streams
            writer.write(request)
            return await asyncio.wait_for(self._response(reader), 10)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            await self.close()
            raise

    @staticmethod
    async def _response(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        length = next(
            int(line.split(":", 1)[1]) for line in head if line.lower().startswith("content-length:")
        )
        body = await reader.readexactly(length)
        try:
            return status, json.loads(body) if body else {}
        except ValueError:  # not JSON (e.g. a bare 500 page): the caller reports what it got
            return status, {"raw": body.decode("utf-8", "replace")[:500]}

    async def close(self) -> None:
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                await streams[1].wait_closed()
