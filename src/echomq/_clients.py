"""Twin Redis clients: a new client to the same server as a bus's client, with its own socket timeout.

The worker needs two connections that the bus's client cannot give it: a blocking (threaded) client for
the lease keeper, which must run while a handler blocks the event loop, and an asyncio client for the
blocking pickup whose socket timeout outlasts the BLPOP (redis-py 8 defaults ``socket_timeout`` to 5 s,
which would abort a 10 s block). Both copy only the connection options that mean the same thing in the
sync and asyncio clients (address, database, credentials, TLS), never the pool's internal state.

Retries: the twins are built on a connection pool, which in redis-py 8.1 and 8.2 means no command retry (the
blocking cluster twin is given none explicitly: 8.2's cluster default tries ten times with backoff) (as
for any client made by ``from_url``, e.g. :meth:`echomq.Bus.from_url`); a client made as
``redis.asyncio.Redis(host=..., ...)`` retries each command up to 10 times on ``ConnectionError`` and
``TimeoutError`` (backoff 10 ms to 1 s). The worker does its own retrying in its loops (the fetcher's
claim, the processor's finishes, the lease keeper's next round). Either way a retried command is sent
again as it was, so a script whose reply was lost (a timeout while Redis paused) can run more than once:
every EchoMQ script is written so that its retry is harmless and answered truthfully (a claim's request
id, the finishing calls' token; see :mod:`echomq.finish` and :mod:`echomq.lanes`).

For a ``redis.asyncio.RedisCluster`` the twins are cluster clients too (``redis.cluster.RedisCluster``,
``redis.asyncio.RedisCluster``), started from the nodes the bus's client knows (all of them once it has
discovered the cluster, else its startup nodes), so each command is routed by its keys' slot. A blocking
cluster client discovers the cluster when it is made, so make it where waiting on the network is fine.
"""

from __future__ import annotations

import socket
from typing import Any

import redis
import redis.asyncio
import redis.cluster
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq._validate import check_int
from echomq.errors import InvalidOption, closed_under_call

# How many times a cluster call closed under it by a concurrent disconnect is sent again (ClusterClient).
CLOSED_UNDER_CALL_TRIES = 3


class ClusterClient(redis.asyncio.RedisCluster):
    """redis-py's asyncio cluster client, with a call whose connection a concurrent disconnect closed
    under it sent again on a new connection, as the client itself retries a ``ConnectionError``.

    redis-py 8.1's cluster client disconnects a node's connections from other tasks (a refreshed slot
    map, a node marked failed, ``CLUSTERDOWN``); one caught between connecting and its first write, or
    waiting for its reply, fails with an ``AttributeError`` ('NoneType' object has no attribute
    'writelines') that the client's own retry does not know (redis-py issues #4287, #3546), and that
    :mod:`echomq.errors` reports as :class:`~echomq.errors.RedisUnavailable`. Sent again, the call finds a
    healthy server: a fresh client met it as its first calls ran side by side (a partitioned worker's and
    a producer's first calls, CI). A call closed while it waited for its reply may have run: every EchoMQ
    script is written so that its retry is harmless, as for redis-py's retry after a lost reply (see the
    module's doc)."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        for _ in range(CLOSED_UNDER_CALL_TRIES - 1):
            try:
                return await super().execute_command(*args, **kwargs)
            except AttributeError as exc:
                if not closed_under_call(exc):
                    raise
        return await super().execute_command(*args, **kwargs)


def client_options(max_connections: int | None) -> dict[str, Any]:
    """The options a bus's ``from_url`` gives its new client (either flavour): raw bytes replies, and the
    pool's size when given (redis-py's default is 100, and a call past it fails at once)."""
    options: dict[str, Any] = {"decode_responses": False}
    if max_connections is not None:
        options["max_connections"] = check_int("max_connections", max_connections, 1, 100_000)
    return options


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


# What a cluster client's connections share besides the address (a cluster has no database and no sockets).
_CLUSTER_PORTABLE = tuple(key for key in _PORTABLE if key not in ("host", "port", "path", "db"))


# A connection without a socket timeout (the blocking pickup's: it blocks up to the idle cap) would never
# learn that a link died silently (a partition that drops packets and sends no reset). Unless the
# application chose its own, such a connection keeps TCP keepalive on: a dead link is found after about
# KEEPALIVE_IDLE_S + KEEPALIVE_PROBES * KEEPALIVE_INTERVAL_S (a minute), the block fails, and the worker
# reconnects and claims again (its pickup's claim is asked again by request id).
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 3


def _keepalive(options: dict[str, Any], socket_timeout: float | None) -> dict[str, Any]:
    """``options`` with TCP keepalive on when ``socket_timeout`` is None and the application set none."""
    if socket_timeout is not None or options.get("socket_keepalive"):
        return options
    tuning = {
        getattr(socket, name): value
        for name, value in (
            ("TCP_KEEPIDLE", KEEPALIVE_IDLE_S),
            ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
            ("TCP_KEEPCNT", KEEPALIVE_PROBES),
        )
        if hasattr(socket, name)
    }
    return {**options, "socket_keepalive": True, "socket_keepalive_options": tuning}


def _options(client: object) -> tuple[redis.asyncio.ConnectionPool, dict[str, Any]]:
    pool = getattr(client, "connection_pool", None)
    if not isinstance(pool, redis.asyncio.ConnectionPool):
        raise InvalidOption(
            f"the worker needs a redis.asyncio.Redis or RedisCluster client, got {type(client).__name__}"
        )
    kwargs = pool.connection_kwargs
    options = {key: kwargs[key] for key in _PORTABLE if key in kwargs}
    options.update({key: value for key, value in kwargs.items() if key.startswith("ssl_")})
    return pool, options


def _cluster_options(client: redis.asyncio.RedisCluster) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """The nodes to start from and the connection options of a cluster client."""
    kwargs = client.get_connection_kwargs()
    options = {key: kwargs[key] for key in _CLUSTER_PORTABLE if key in kwargs}
    kind = kwargs.get("connection_class")
    if isinstance(kind, type) and issubclass(kind, redis.asyncio.SSLConnection):
        options["ssl"] = True
        options.update({key: value for key, value in kwargs.items() if key.startswith("ssl_")})
    nodes = client.get_nodes() or client.startup_nodes  # none discovered yet: where the bus starts
    return [(node.host, int(node.port)) for node in nodes], options


def blocking_twin(
    client: object, *, socket_timeout: float | None
) -> redis.Redis | redis.cluster.RedisCluster:
    """A blocking ``redis.Redis`` to the server of ``client`` (raw bytes replies); for a cluster client a
    ``redis.cluster.RedisCluster``, which connects (discovers the cluster) before it returns."""
    if isinstance(client, redis.asyncio.RedisCluster):
        nodes, options = _cluster_options(client)
        node = redis.cluster.ClusterNode
        return redis.cluster.RedisCluster(
            startup_nodes=[node(host, port) for host, port in nodes],  # type: ignore[no-untyped-call]
            socket_timeout=socket_timeout,
            decode_responses=False,
            # No retry of its own: redis-py 8.2's default (10 tries, exponential backoff) makes a call to a
            # node that is down take seconds, longer than a lease; the keeper's next round is its retry.
            retry=Retry(NoBackoff(), 0),
            **options,
        )
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
    return redis.Redis.from_pool(twin)  # owns its pool: closing it closes its connections


def async_twin(
    client: object, *, socket_timeout: float | None
) -> redis.asyncio.Redis | redis.asyncio.RedisCluster:
    """An asyncio ``redis.asyncio.Redis`` to the server of ``client`` with its own pool and timeout; for a
    cluster client a ``redis.asyncio.RedisCluster`` (it connects on first use)."""
    if isinstance(client, redis.asyncio.RedisCluster):
        nodes, options = _cluster_options(client)
        return ClusterClient(
            startup_nodes=[AsyncClusterNode(host, port) for host, port in nodes],
            socket_timeout=socket_timeout,
            decode_responses=False,
            **options,
        )
    pool, options = _options(client)
    twin = redis.asyncio.ConnectionPool(
        connection_class=pool.connection_class,
        socket_timeout=socket_timeout,
        decode_responses=False,
        **_keepalive(options, socket_timeout),
    )
    return redis.asyncio.Redis.from_pool(twin)  # owns its pool: closing it closes its connections


async def node_twin(
    client: redis.asyncio.RedisCluster, key: str, *, socket_timeout: float | None
) -> redis.asyncio.Redis:
    """A plain asyncio client to the cluster node that owns ``key``'s slot.

    The blocking pickup uses it for its BLPOP on a cluster: redis-py's cluster client leaks the sockets
    of a command cancelled while it (re)discovers the cluster, and a stopping worker cancels its BLPOP. A
    plain client drops a cancelled connection cleanly; if the slot moves, the BLPOP fails and the fetcher
    asks again which node owns it.
    """
    await client.initialize()
    node = client.get_node_from_key(key)
    if node is None:
        raise redis.exceptions.RedisClusterException(f"no cluster node owns the slot of {key}")
    _, options = _cluster_options(client)
    return redis.asyncio.Redis(
        host=node.host,
        port=int(node.port),
        socket_timeout=socket_timeout,
        decode_responses=False,
        **_keepalive(options, socket_timeout),
    )
