"""Script calls on the wire: one EVALSHA packed once, written and answered on a pooled connection.

redis-py runs a script through ``Script.__call__`` -> ``execute_command`` -> its pool -> ``pack_command``
(pure Python in the asyncio client) -> a send under ``asyncio.wait_for`` (a new task for every command
once a socket timeout is set) -> a read. For a call that is one round trip, that is most of the
client's CPU: admission one by one was 0.68 of a raw blocking loop. Here a call is packed once by
hiredis (C) and written straight to the connection, and its reply read by the connection's own parser
under its socket timeout; connecting, the handshake (credentials, database, TLS), the Retry policy and
the disconnect on error stay redis-py's.

What is the same as through ``Script.__call__``: a ``ConnectionError`` or ``TimeoutError`` disconnects
and retries as the client's Retry says (none for a ``from_url`` client) and the command is sent again
as it was, so a script whose reply was lost runs again and answers truthfully (every EchoMQ script is
written for that); an error reply raises redis-py's exception, ``NOSCRIPT`` included, on which the
caller loads the script on the same connection and runs it again (nothing ran), as ``Script.__call__``
would.

:class:`AsyncWire` keeps one connection of its own, made by the pool with the pool's settings but outside
its count (so a pool sized for N callers still serves N), and sends on it while it is free; a call made
while it is busy takes one from the pool, as redis-py would. So an awaited call one by one skips the
pool's lock and bookkeeping. Every bus on one client shares its wire (:func:`async_wire`), and
:meth:`echomq.Bus.aclose`, which closes the client, closes that connection too (:meth:`AsyncWire.release`).
:class:`SyncWire` takes a connection from the pool for each call (the blocking pool is cheap and
thread-safe), so one client serves many threads.
Only a plain ``Redis`` client on a pool takes this path; a cluster client, a single-connection client
and a pipeline go through redis-py as before (:mod:`echomq.scripts`).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

import hiredis
import redis
import redis.asyncio
from redis.exceptions import ResponseError

# A command longer than this is sent with redis-py's own send (it waits for the socket to drain, under
# the socket timeout); a shorter one is handed to the transport, which sends it at once or buffers it,
# and the read that follows is bounded by the socket timeout all the same.
_DIRECT_BYTES = 64 * 1024


def pack(sha: str, keys: list[str], args: list[Any]) -> bytes:
    """The RESP bytes of ``EVALSHA sha len(keys) *keys *args`` (str, bytes and int arguments)."""
    return pack_args("EVALSHA", sha, len(keys), *keys, *args)


def pack_args(*args: Any) -> bytes:
    """The RESP bytes of one command (str, bytes and int arguments), packed by hiredis."""
    packed: bytes = hiredis.pack_command(args)
    return packed


def pack_load(source: str | bytes | memoryview) -> bytes:
    """The RESP bytes of ``SCRIPT LOAD source``."""
    return pack_args("SCRIPT", "LOAD", source)


def _fits(client: object, kind: type) -> bool:
    return (
        type(client) is kind
        and not getattr(client, "single_connection_client", False)  # asyncio: connects on first use
        and getattr(client, "connection", None) is None  # blocking: a single connection is made at once
    )


def plain_async(client: object) -> TypeGuard[redis.asyncio.Redis]:
    """True for a plain ``redis.asyncio.Redis`` on a pool (not a cluster, not a single connection)."""
    return _fits(client, redis.asyncio.Redis)


def plain_sync(client: object) -> TypeGuard[redis.Redis]:
    """True for a plain blocking ``redis.Redis`` on a pool."""
    return _fits(client, redis.Redis)


async def _send_read(conn: redis.asyncio.Connection, command: bytes, replies: int | None) -> Any:
    writer = getattr(conn, "_writer", None)  # redis-py's StreamWriter; None while disconnected
    if (
        writer is not None
        and len(command) <= _DIRECT_BYTES
        and not conn.health_check_interval
        and not writer.transport.is_closing()
    ):
        writer.write(command)
    else:
        await conn.send_packed_command(command)  # connects if need be
    if replies is None:  # one command, its reply unwrapped
        return await conn.read_response()
    out: list[Any] = []
    for _ in range(replies):
        try:
            out.append(await conn.read_response())
        except ResponseError as error:  # that reply was read whole: the next one follows
            out.append(error)
    return out


async def _stale(conn: redis.asyncio.Connection) -> bool:
    """Has the server closed ``conn`` while it was idle, or sent bytes no call asked for? redis-py 8.1
    answers the close with True, 8.2 with a ConnectionError (as its pool's own check expects)."""
    try:
        return bool(await conn.can_read())
    except (redis.exceptions.ConnectionError, OSError):
        return True


class AsyncWire:
    """Script calls on a plain ``redis.asyncio.Redis`` (see the module doc)."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._own: redis.asyncio.Connection | None = None
        self._busy = False

    async def call(self, command: bytes) -> Any:
        """Send one packed command and return its reply (an error reply raises)."""
        return await self._run(command, None)

    async def call_many(self, command: bytes, count: int) -> list[Any]:
        """Send ``count`` packed commands at once; their replies in order, an error reply as its
        exception (a pipeline that does not stop at the first error)."""
        replies: list[Any] = await self._run(command, count)
        return replies

    async def _run(self, command: bytes, replies: int | None) -> Any:
        pool = self.client.connection_pool
        if self._busy:  # another call of this task's loop holds our connection: take one from the pool
            conn = await pool.get_connection()  # type: ignore[no-untyped-call]
            try:
                return await self._retrying(conn, command, replies)
            finally:
                await pool.release(conn)
        self._busy = True
        try:
            own = self._own
            if own is None:
                own = self._own = pool.make_connection()  # type: ignore[no-untyped-call] # connects on its first send
            elif own.is_connected and await _stale(own):
                # As the pool checks what it hands out: a connection the server closed while it was idle
                # (a restart, an idle timeout), or with bytes no call asked for, is made anew first.
                await own.disconnect()
            return await self._retrying(own, command, replies)
        finally:
            self._busy = False

    @staticmethod
    async def _retrying(conn: redis.asyncio.Connection, command: bytes, replies: int | None) -> Any:
        attempt: Callable[[], Awaitable[Any]] = lambda: _send_read(conn, command, replies)  # noqa: E731
        return await conn.retry.call_with_retry(attempt, lambda _error: conn.disconnect())

    async def release(self) -> None:
        """Close the wire's own connection (its client closes); a later call opens a new one."""
        if self._own is not None:
            own, self._own = self._own, None
            await own.disconnect()


_WIRES: weakref.WeakKeyDictionary[redis.asyncio.Redis, AsyncWire] = weakref.WeakKeyDictionary()


def async_wire(client: redis.asyncio.Redis) -> AsyncWire:
    """The one wire of ``client``: every bus on one client shares it (and its one connection), so the
    bus that closes the client closes it."""
    wire = _WIRES.get(client)
    if wire is None:
        wire = _WIRES[client] = AsyncWire(client)
    return wire


def _send_read_sync(conn: redis.Connection, command: bytes, replies: int | None) -> Any:
    conn.send_packed_command([command])  # type: ignore[no-untyped-call]  # a list of buffers
    if replies is None:  # one command, its reply unwrapped
        return conn.read_response()
    out: list[Any] = []
    for _ in range(replies):
        try:
            out.append(conn.read_response())
        except ResponseError as error:
            out.append(error)
    return out


class SyncWire:
    """Script calls on a plain blocking ``redis.Redis``; safe to share between threads."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def call(self, command: bytes) -> Any:
        return self._run(command, None)

    def call_many(self, command: bytes, count: int) -> list[Any]:
        replies: list[Any] = self._run(command, count)
        return replies

    def _run(self, command: bytes, replies: int | None) -> Any:
        pool = self.client.connection_pool
        conn = pool.get_connection()
        try:
            return conn.retry.call_with_retry(
                lambda: _send_read_sync(conn, command, replies),
                lambda _error: conn.disconnect(),  # type: ignore[no-untyped-call]
            )
        finally:
            pool.release(conn)
