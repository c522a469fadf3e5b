"""The blocking pickup's connection has no socket timeout (it blocks up to the idle cap), so it keeps TCP
keepalive on: a link that dies silently (a partition that drops packets, no reset) is found in about a
minute, not at the end of a ten-minute block."""

from __future__ import annotations

import socket

import redis.asyncio

from echomq import Bus
from echomq._clients import KEEPALIVE_IDLE_S, async_twin


async def _socket_of(client: redis.asyncio.Redis) -> tuple[redis.asyncio.Redis, socket.socket]:
    conn = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
    sock = conn._writer.get_extra_info("socket")  # the test reads the real socket's options
    return client, sock


async def test_a_connection_without_a_socket_timeout_keeps_tcp_keepalive_on(fresh_server):
    async with Bus.from_url(fresh_server.url, tag="keepalive") as bus:
        twin = async_twin(bus.redis, socket_timeout=None)
        assert isinstance(twin, redis.asyncio.Redis)
        try:
            _, sock = await _socket_of(twin)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if hasattr(socket, "TCP_KEEPIDLE"):
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE_S
        finally:
            await twin.aclose()


async def test_an_applications_own_keepalive_settings_are_kept(fresh_server):
    options = {socket.TCP_KEEPIDLE: 77} if hasattr(socket, "TCP_KEEPIDLE") else {}
    client = redis.asyncio.Redis(
        port=fresh_server.port, socket_keepalive=True, socket_keepalive_options=options
    )
    async with Bus(client, tag="keepalive") as bus:
        twin = async_twin(bus.redis, socket_timeout=None)
        assert isinstance(twin, redis.asyncio.Redis)
        try:
            _, sock = await _socket_of(twin)
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
            if options:
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 77
        finally:
            await twin.aclose()
