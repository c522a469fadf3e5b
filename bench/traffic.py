"""The load generator's side of HTTP: guess POSTs written as bytes on bare keep-alive sockets.

The generator is a bare socket, so a figure is the host's and not an HTTP client library's (which would
share the machine's two cores with it). :func:`closed_loop` sends as fast as the host answers;
:func:`open_loop` sends on a schedule whatever the replies, so a host that falls behind shows as queueing.
"""

from __future__ import annotations

import asyncio
import json
import time

IDLE_S = 4.0  # a keep-alive connection idle this long is not reused (uvicorn closes one idle 5 s)


def guess_request(port: int, round_id: str, token: str, guess: tuple[str, ...]) -> bytes:
    """One keep-alive POST of a guess, as the bytes written to the socket."""
    body = json.dumps({"guess": list(guess)}).encode()
    head = (
        f"POST /api/rounds/{round_id}/guesses HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    return status, await reader.readexactly(length)


class Connections:
    """Keep-alive connections to the host: a free one is reused, else a new one opened. One left idle for
    :data:`IDLE_S` or more is closed instead of reused: uvicorn closes a keep-alive connection idle for 5 s,
    and a request written as it closes would count as a broken connection that no browser would see (a
    browser retries a request on a reused connection the server closed)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.free: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []
        self.opened = 0

    async def post(self, data: bytes) -> tuple[int, bytes]:
        now = time.monotonic()
        while self.free and (now - self.free[-1][2] >= IDLE_S or self.free[-1][0].at_eof()):
            self.free.pop()[1].close()
        if self.free:
            reader, writer, _ = self.free.pop()
        else:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.opened += 1
        writer.write(data)
        status, body = await read_response(reader)
        self.free.append((reader, writer, time.monotonic()))
        return status, body

    async def close(self) -> None:
        for _, writer, _ in self.free:
            writer.close()
        self.free.clear()


async def closed_loop(port: int, requests: list[bytes], connections: int) -> tuple[float, int]:
    """``requests`` over ``connections`` keep-alive connections, each one after another: (guesses per
    second, errors)."""
    pool = Connections(port)
    errors = 0
    share = [requests[i::connections] for i in range(connections)]

    async def run(mine: list[bytes]) -> None:
        nonlocal errors
        for data in mine:
            status, _ = await pool.post(data)
            errors += status != 202

    start = time.perf_counter()
    await asyncio.gather(*(run(mine) for mine in share))
    elapsed = time.perf_counter() - start
    await pool.close()
    return len(requests) / elapsed, errors


async def open_loop(
    port: int, requests: list[bytes], rate: float
) -> tuple[list[tuple[float, float, str]], float]:
    """Send ``requests`` on schedule at ``rate`` a second: (due time ms epoch, reply ms, the job id, or the
    HTTP status of a refusal, or ``"broken"``) each, and the rate achieved."""
    pool = Connections(port)
    results: list[tuple[float, float, str]] = []
    tasks = []

    async def one(data: bytes, due_ms: float) -> None:
        try:
            status, body = await pool.post(data)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            results.append((due_ms, float("nan"), "broken"))
            return
        replied = time.time() * 1000 - due_ms
        results.append((due_ms, replied, json.loads(body)["job_id"] if status == 202 else str(status)))

    loop = asyncio.get_running_loop()
    start = loop.time()
    for i, data in enumerate(requests):
        offset = i / rate
        delay = start + offset - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        late = loop.time() - (start + offset)  # the due time on the wall clock, read now (no drift)
        tasks.append(asyncio.create_task(one(data, (time.time() - late) * 1000)))
    achieved = len(requests) / max(1e-9, loop.time() - start)
    await asyncio.gather(*tasks)
    await pool.close()
    return results, achieved
