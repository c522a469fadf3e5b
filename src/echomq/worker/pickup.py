"""The pickup connection: a BLPOP on the wake list with the claim pipelined behind it.

An idle worker sends two commands in one write on a connection of its own: ``BLPOP wake <timeout>``
and the EVALSHA of its claim. Redis holds the claim until the BLPOP returns, then runs it at once, so
a wake token goes straight to a claim with no round trip between them, and the worker reads both
replies: the token (or none, when the block timed out) and the claim's answer. The claim runs in
either case, so the end of every block is also a claim (a token lost by another client, say, never
leaves a queued job unclaimed past one block).

Lean by design, since this is the path of pickup latency: one connection held for the worker's life
(no pool round trip per block), the two commands packed in one buffer, the replies read straight from
the connection's parser (hiredis when installed), no socket timeout on the connection (redis-py would
run each write through ``asyncio.wait_for``) but one deadline over the whole exchange, the block plus
:data:`MARGIN_S`.

A claim that never answered (the connection failed, the deadline passed, the caller cancelled) may
have run: the caller keeps its request id and asks again (see :mod:`echomq.worker.fetcher`). Any
failure drops the connection, so the next block starts on a clean one. On a cluster the connection
goes to the node owning the wake key's slot (a plain client: redis-py's cluster client leaks the
sockets of a command cancelled while it rediscovers the cluster, and a stopping worker cancels its
block); after a failure the node is asked for again, as the slot may have moved.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError

from echomq._clients import async_twin, node_twin
from echomq.bus import Bus
from echomq.errors import RedisUnavailable, translate_redis_errors

MARGIN_S = 5.0  # how long past its block timeout a pickup may take before it counts as unanswered


class NoScript:
    """The claim was not run: the server's script cache lacks it (a restarted or flushed server)."""


NOSCRIPT = NoScript()


class Pickup:
    """One worker's blocking connection to the server (on a cluster, the node) owning the wake list."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._client: redis.asyncio.Redis | None = None
        self._conn: AbstractConnection | None = None

    async def _connection(self) -> AbstractConnection:
        if self._conn is None:
            await self.aclose()  # a client whose connection failed to open is closed, not dropped
            with translate_redis_errors():
                if isinstance(self.bus.redis, redis.asyncio.RedisCluster):
                    client = await node_twin(self.bus.redis, self.bus.keys.wake, socket_timeout=None)
                else:
                    twin = async_twin(self.bus.redis, socket_timeout=None)
                    assert isinstance(twin, redis.asyncio.Redis)
                    client = twin
                self._client = client
                self._conn = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        return self._conn

    async def wait_and_claim(self, timeout_s: float, keys: list[str], args: list[Any]) -> Any:
        """Block on the wake list up to ``timeout_s``, then claim (``keys`` and ``args`` of claim.lua).

        Returns the claim's raw reply, or :data:`NOSCRIPT` when the server lacks the script (the claim
        did not run). Raises :class:`~echomq.errors.RedisUnavailable` (the claim may have run),
        :class:`~echomq.errors.ScriptError` (an error reply), or ``CancelledError``."""
        sha = self.bus.scripts.get("claim", keys).sha
        conn = await self._connection()
        packed = conn.pack_commands(
            (("BLPOP", self.bus.keys.wake, round(timeout_s, 3)), ("EVALSHA", sha, len(keys), *keys, *args))
        )
        try:
            async with asyncio.timeout(timeout_s + MARGIN_S):
                with translate_redis_errors():
                    await conn.send_packed_command(packed, check_health=False)
                    await conn.read_response()  # the token, or None when the block timed out
                    try:
                        return await conn.read_response()
                    except NoScriptError:
                        return NOSCRIPT
        except TimeoutError:
            await self.reset()
            raise RedisUnavailable(f"no answer to a pickup within {timeout_s + MARGIN_S:g} s") from None
        except BaseException:
            await self.reset()
            raise

    async def wait(self, timeout_s: float) -> bool:
        """Block on the wake list alone up to ``timeout_s``; True if a token was popped (a partitioned
        worker's block: :mod:`echomq.worker.rotation`). Raises like :meth:`wait_and_claim`."""
        conn = await self._connection()
        packed = conn.pack_command("BLPOP", self.bus.keys.wake, round(timeout_s, 3))
        try:
            async with asyncio.timeout(timeout_s + MARGIN_S):
                with translate_redis_errors():
                    await conn.send_packed_command(packed, check_health=False)
                    return await conn.read_response() is not None
        except TimeoutError:
            await self.reset()
            raise RedisUnavailable(f"no answer to a block within {timeout_s + MARGIN_S:g} s") from None
        except BaseException:
            await self.reset()
            raise

    async def reset(self) -> None:
        """Drop the connection (a half-read exchange cannot be resumed); the next block opens one. On a
        cluster the node is asked for again: the slot may have moved."""
        if self._conn is not None:
            await self._conn.disconnect(nowait=True)
        if isinstance(self.bus.redis, redis.asyncio.RedisCluster):
            await self.aclose()

    async def aclose(self) -> None:
        conn, client = self._conn, self._client
        self._conn = self._client = None
        if client is not None:
            if conn is not None:
                await client.connection_pool.release(conn)
            await client.aclose()
