"""Twin Redis clients: a new client to the same server as a bus's client, with its own socket timeout.

The worker needs two connections that the bus's client cannot give it: a blocking (threaded) client for
the lease keeper, which must run while a handler blocks the event loop, and an asyncio client for the
blocking pickup whose socket timeout outlasts the BLPOP (redis-py 8 defaults ``socket_timeout`` to 5 s,
which would abort a 10 s block). Both copy only the connection options that mean the same thing in the
sync and asyncio clients (address, database, credentials, TLS), never the pool's internal state.
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio

from echomq.errors import InvalidOption

# Options that select the same server, database and identity in both redis-py client flavours.
_PORTABLE = (
    "host",
    "port",
    "path",
    "db",
    "username",
    "password",
    "credential_provider",
    "client_name",
    "socket_connect_timeout",
    "socket_keepalive",
    "socket_keepalive_options",
    "protocol",
)


def _options(client: object) -> tuple[redis.asyncio.ConnectionPool, dict[str, Any]]:
    pool = getattr(client, "connection_pool", None)
    if not isinstance(pool, redis.asyncio.ConnectionPool):
        raise InvalidOption(
            f"the worker needs a redis.asyncio.Redis client on one server, got {type(client).__name__}"
        )
    kwargs = pool.connection_kwargs
    options = {key: kwargs[key] for key in _PORTABLE if key in kwargs}
    options.update({key: value for key, value in kwargs.items() if key.startswith("ssl_")})
    return pool, options


def blocking_twin(client: object, *, socket_timeout: float | None) -> redis.Redis:
    """A blocking ``redis.Redis`` to the server of ``client`` (raw bytes replies)."""
    pool, options = _options(client)
    kind = pool.connection_class.__name__
    classes: dict[str, type[redis.Connection | redis.SSLConnection | redis.UnixDomainSocketConnection]] = {
        "Connection": redis.Connection,
        "SSLConnection": redis.SSLConnection,
        "UnixDomainSocketConnection": redis.UnixDomainSocketConnection,
    }
    if kind not in classes:
        raise InvalidOption(f"the worker cannot copy a {kind} connection for its lease keeper")
    twin = redis.ConnectionPool(
        connection_class=classes[kind], socket_timeout=socket_timeout, decode_responses=False, **options
    )
    return redis.Redis(connection_pool=twin)


def async_twin(client: object, *, socket_timeout: float | None) -> redis.asyncio.Redis:
    """An asyncio ``redis.asyncio.Redis`` to the server of ``client`` with its own pool and timeout."""
    pool, options = _options(client)
    twin = redis.asyncio.ConnectionPool(
        connection_class=pool.connection_class,
        socket_timeout=socket_timeout,
        decode_responses=False,
        **options,
    )
    return redis.asyncio.Redis(connection_pool=twin)
