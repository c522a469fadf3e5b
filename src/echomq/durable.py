"""Durable admission: an enqueue acknowledged only once a replica holds it (``Settings.wait_replicas``).

Redis replicates asynchronously: a master acknowledges a script as soon as it ran, and a master that
dies before its replica received the script's effects takes them with it; the replica promoted in its
place never saw them. Without this option, an admission acknowledged less than a replication round
trip before a failover (typically under a millisecond, longer under load or a slow link) can be lost
whole: the job, its row and its tombstone are gone, so a producer's retry admits it anew (nothing is
doubled, but a producer that does not retry loses the job). A finish is lost the same way and whole (the
job runs again, under the promoted replica's attempts token), never half: a script's effects replicate
as one unit.

With ``wait_replicas=n`` (on :class:`~echomq.bus.Bus`, and on :class:`~echomq.sync.SyncBus` through
:func:`run_blocking`) each admission is sent, on one connection to the master that owns the bus's
slot, as ``EVALSHA enqueue ...``, ``HINCRBY stats durable 1`` and ``WAIT n timeout`` in one round
trip. ``WAIT`` returns once ``n`` replicas acknowledged every write of that connection so far; the
HINCRBY is a write on that connection in any case, so a retried admission (answered DUPLICATE, which
writes nothing) waits too, until the replicas hold everything its first try wrote. Fewer than ``n``
acknowledgements within ``wait_timeout_ms`` raises :class:`~echomq.errors.NotDurable` (a
:class:`~echomq.errors.RedisUnavailable`: the admission ran on the master but is not known to be on a
replica; retry it, it is idempotent). On a failover the connection fails or the node answers MOVED: the
cluster map is read again and the call raises RedisUnavailable, for the caller's retry to reach the new
master.

What it proves: with one replica per master (the failover promotes that replica), an admission
acknowledged under ``wait_replicas=1`` survives the master's death. With several replicas, ``WAIT 1``
proves one holds it and Redis promotes the replica with the most data, but a promotion of another one
can still lose it: wait for all of them. ``WAIT`` is not a consensus: a replica that acknowledged can
itself die before the failover.

An application's own admission script goes through the same wire (:meth:`DurableWire.run` takes the
script library to run it from; Codemojex's ``submit.lua`` and ``post_guess.lua`` do, with the charge and
the job in one script): what is acknowledged under ``wait_replicas`` is on the replicas whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import redis.asyncio
import redis.cluster
import redis.exceptions
from redis.asyncio import Redis, RedisCluster

from echomq._clients import _cluster_options
from echomq.errors import NotDurable, RedisUnavailable, translate_redis_errors
from echomq.keyspace import Keyspace
from echomq.scripts import AsyncScripts


class _Waits(Protocol):
    @property
    def wait_replicas(self) -> int: ...
    @property
    def wait_timeout_ms(self) -> int: ...


class DurableBus(Protocol):
    """What the wire needs of a bus (:class:`echomq.core.BusCore` has it; no import back to it)."""

    redis: Redis | RedisCluster
    keys: Keyspace
    scripts: AsyncScripts

    @property
    def settings(self) -> _Waits: ...


class DurableWire:
    """A bus's connection to the master that owns its slot, for admissions followed by ``WAIT``."""

    def __init__(self, bus: DurableBus) -> None:
        self.bus = bus
        self._node: Redis | None = None  # on a cluster: a plain client to the slot's master
        self._opening = asyncio.Lock()
        self._retired: list[Redis] = []  # node clients given up on, with calls still on them
        self._users: dict[int, int] = {}  # id of a client -> the calls on it now

    async def _client(self) -> Redis:
        client = self.bus.redis
        if not isinstance(client, RedisCluster):
            return client  # a pipeline of a plain client holds one connection for its round trip
        async with self._opening:  # concurrent admissions share one node client, none left unclosed
            if self._node is None:
                await client.initialize()
                node = client.get_node_from_key(self.bus.keys.ring)
                if node is None:
                    raise RedisUnavailable(f"no cluster node owns the slot of {self.bus.keys.ring}")
                _, options = _cluster_options(client)
                self._node = Redis(host=node.host, port=int(node.port), decode_responses=False, **options)
            return self._node

    async def run(
        self, name: str, calls: list[tuple[list[str], list[Any]]], library: AsyncScripts | None = None
    ) -> list[Any]:
        """Run script ``name`` of ``library`` (by default the bus's own: EchoMQ's) once per call, then
        wait for the replicas; the replies (an error reply as its value). An application's library (the
        game's admission) must declare keys in the bus's slot. Raises NotDurable or RedisUnavailable
        (see the module doc)."""
        settings = self.bus.settings
        registry = self.bus.scripts if library is None else library
        scripts = [registry.get(name, keys) for keys, _ in calls]
        client = await self._client()
        self._users[id(client)] = self._users.get(id(client), 0) + 1
        try:
            with translate_redis_errors():
                pipe: Any
                async with client.pipeline(transaction=False) as pipe:
                    for script, (keys, args) in zip(scripts, calls, strict=True):
                        await script(keys=keys, args=args, client=pipe)
                    pipe.hincrby(self.bus.keys.stats, "durable", 1)
                    pipe.execute_command("WAIT", settings.wait_replicas, settings.wait_timeout_ms)
                    replies: list[Any] = await pipe.execute(raise_on_error=False)
            if _moved(replies):  # the slot has another master now (a failover, a reshard): find it
                await self._forget(client)
            return _acknowledged(replies, len(calls), settings)
        except RedisUnavailable:
            await self._forget(client)
            raise
        finally:
            await self._done_with(client)

    async def _forget(self, failed: Redis) -> None:
        """Stop handing out the node client ``failed`` (it is closed once its last call ends: see
        :meth:`_done_with`) and read the cluster's map again (the next call finds the master)."""
        if failed is self._node:
            self._node = None
            self._retired.append(failed)
        if isinstance(self.bus.redis, RedisCluster):
            # the cluster may still be electing: the next call reads the map again
            with contextlib.suppress(redis.exceptions.RedisError, OSError):
                await self.bus.redis.nodes_manager.initialize()

    async def _done_with(self, client: Redis) -> None:
        """A call on ``client`` ended: a node client given up on is closed when its last call ends (a
        call still on it may have reconnected it), and forgotten: none is left open, none piles up."""
        users = self._users[id(client)] - 1
        if users:
            self._users[id(client)] = users
            return
        del self._users[id(client)]
        if client in self._retired:
            self._retired.remove(client)
            await client.aclose()

    async def aclose(self) -> None:
        clients = [*self._retired, *([self._node] if self._node is not None else [])]
        self._node, self._retired = None, []
        for client in clients:
            await client.aclose()


def run_blocking(bus: Any, name: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
    """:meth:`DurableWire.run` for :class:`~echomq.sync.SyncBus` (``bus``: its client, keys, scripts
    and settings) on a blocking client: on a cluster, the pipeline goes to the slot master's own
    connection pool (redis-py's node client); a MOVED reply or a dead connection reads the map again
    and raises RedisUnavailable. The same replies and errors."""
    settings = bus.settings
    client = bus.redis
    cluster = isinstance(client, redis.cluster.RedisCluster)
    try:
        with translate_redis_errors():
            if cluster:
                client = _node_client(client, bus.keys.ring)
            with client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    bus.scripts.run(name, keys, args, client=pipe)
                pipe.hincrby(bus.keys.stats, "durable", 1)
                pipe.execute_command("WAIT", settings.wait_replicas, settings.wait_timeout_ms)
                replies: list[Any] = pipe.execute(raise_on_error=False)
    except RedisUnavailable:
        if cluster:
            with contextlib.suppress(redis.exceptions.RedisError, OSError):
                bus.redis.nodes_manager.initialize()
        raise
    if _moved(replies):
        with contextlib.suppress(redis.exceptions.RedisError, OSError):
            bus.redis.nodes_manager.initialize()
    return _acknowledged(replies, len(calls), settings)


def _moved(replies: list[Any]) -> bool:
    return any(isinstance(r, redis.exceptions.MovedError | redis.exceptions.AskError) for r in replies)


def _acknowledged(replies: list[Any], calls: int, settings: _Waits) -> list[Any]:
    """The scripts' replies of a durable pipeline (its last reply is WAIT's); RedisUnavailable when a
    node answered MOVED or ASK (the caller read the map again: retry), NotDurable when fewer replicas
    than asked acknowledged."""
    moved = [r for r in replies if isinstance(r, redis.exceptions.MovedError | redis.exceptions.AskError)]
    if moved:
        raise RedisUnavailable(f"the bus's slot moved ({moved[0]}); retry the admission")
    acked = replies[-1]
    if isinstance(acked, Exception) or int(acked) < settings.wait_replicas:
        raise NotDurable(
            f"{acked} of {settings.wait_replicas} replicas acknowledged within "
            f"{settings.wait_timeout_ms} ms: admitted on the master, not known to be on a replica"
        )
    return replies[:calls]


def _node_client(cluster: redis.cluster.RedisCluster, key: str) -> redis.Redis:
    """redis-py's own client of the master that owns ``key``'s slot (its pool, not a new one)."""
    node = cluster.get_node_from_key(key)  # type: ignore[no-untyped-call]
    if node is None or node.redis_connection is None:
        raise RedisUnavailable(f"no cluster node owns the slot of {key}")
    client: redis.Redis = node.redis_connection
    return client
