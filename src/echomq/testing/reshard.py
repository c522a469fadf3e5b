"""Move one hash slot of a real Redis Cluster to another master key by key, as ``redis-cli --cluster
reshard`` does, with room for other work between the steps (for the tests and the conformance suite).

The steps are Redis's own slot migration, nothing simulated:

1. ``CLUSTER SETSLOT <slot> IMPORTING <source-id>`` on the target, then ``MIGRATING <target-id>`` on the
   source (redis-cli's order: the target accepts ASKING first);
2. ``MIGRATE`` of the slot's keys, one key per call (``CLUSTER GETKEYSINSLOT`` lists what is left); a key
   that already exists on the target is refused (BUSYKEY) and raised as :class:`ReshardError`: someone
   wrote a second copy of it there, which ``redis-cli`` would stop on too;
3. ``CLUSTER SETSLOT <slot> NODE <target-id>`` on the target, the source and every other master.

While the slot is open, the source serves a command whose keys it still holds and answers ASK for the
rest; the target serves a command sent after ASKING, but answers TRYAGAIN to one that names several keys
when some are missing. Inside a Lua script, a command on a key the node does not hold (or, on the target,
a multi-key command with one missing) fails the script with "non local key" from that command on, and
the script's earlier writes stay (see ``echomq/lua/includes/slot.lua``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

import redis
from redis.crc import key_slot

from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.server import ServerError

_MIGRATE_TIMEOUT_MS = 5000
_AGREE_TIMEOUT_S = 10.0


class ReshardError(ServerError):
    """A step of a slot migration was refused (e.g. BUSYKEY: the target already holds that key)."""


def _command(client: redis.Redis, *args: object) -> Any:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def slot_of(key: str) -> int:
    """The cluster hash slot of ``key`` (its hash tag's slot)."""
    return int(key_slot(key.encode()))


def slot_owner(cluster: RedisClusterProcesses, slot: int) -> int:
    """The port of the master that serves ``slot`` now (asked of the first node that answers; after a
    failover the masters are not the ones the cluster was formed with)."""
    for port in cluster.all_ports:
        with redis.Redis(port=port, socket_timeout=5) as client:
            try:
                ranges = _command(client, "CLUSTER", "SLOTS")
            except redis.ConnectionError:
                continue
        for start, end, master, *_ in ranges:
            if int(start) <= slot <= int(end):
                return int(master[1])
    raise ReshardError(f"no node answers for slot {slot}")


class SlotMigration:
    """One slot's move from the master that serves it to the master on ``to_port``, step by step.

    Use :meth:`begin`, then :meth:`move` for each key of :meth:`pending` (in any order, with any work in
    between), then :meth:`finish`; or :meth:`run` for all of it. Every call is a blocking client call.
    """

    def __init__(self, cluster: RedisClusterProcesses, slot: int, to_port: int) -> None:
        self.cluster = cluster
        self.slot = slot
        self.source_port = slot_owner(cluster, slot)
        self.masters = cluster.masters()  # now: a failover promotes a replica, its old master follows it
        if to_port == self.source_port or to_port not in self.masters:
            raise ReshardError(f"port {to_port} is not another master of the cluster")
        self.target_port = to_port
        self.moved: list[bytes] = []

    def _client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=10)

    def _id(self, port: int) -> str:
        with self._client(port) as client:
            return bytes(_command(client, "CLUSTER", "MYID")).decode()

    def begin(self) -> None:
        """Open the slot: IMPORTING on the target, then MIGRATING on the source."""
        source_id, target_id = self._id(self.source_port), self._id(self.target_port)
        with self._client(self.target_port) as target:
            _command(target, "CLUSTER", "SETSLOT", self.slot, "IMPORTING", source_id)
        with self._client(self.source_port) as source:
            _command(source, "CLUSTER", "SETSLOT", self.slot, "MIGRATING", target_id)

    def pending(self, count: int = 100_000) -> list[bytes]:
        """The slot's keys still on the source (``CLUSTER GETKEYSINSLOT``)."""
        with self._client(self.source_port) as source:
            return list(_command(source, "CLUSTER", "GETKEYSINSLOT", self.slot, count))

    def move(self, key: bytes | str) -> bool:
        """MIGRATE one key to the target; False if the source no longer holds it (NOKEY)."""
        name = key.encode() if isinstance(key, str) else key
        with self._client(self.source_port) as source:
            try:
                reply = _command(
                    source, "MIGRATE", "127.0.0.1", self.target_port, name, 0, _MIGRATE_TIMEOUT_MS
                )
            except redis.ResponseError as exc:
                raise ReshardError(f"MIGRATE {name!r} to {self.target_port}: {exc}") from exc
        if reply in (b"NOKEY", "NOKEY"):
            return False
        self.moved.append(name)
        return True

    def move_all(self, keys: Iterable[bytes | str]) -> int:
        """MIGRATE each of ``keys`` in order; how many moved."""
        return sum(self.move(key) for key in keys)

    def finish(self) -> None:
        """Move what is left, then assign the slot to the target on the target, the source and the rest."""
        while left := self.pending():
            self.move_all(left)
        target_id = self._id(self.target_port)
        others = [p for p in self.masters if p not in (self.source_port, self.target_port)]
        for port in (self.target_port, self.source_port, *others):
            with self._client(port) as client:
                _command(client, "CLUSTER", "SETSLOT", self.slot, "NODE", target_id)
        self._await_agreement()

    def _await_agreement(self) -> None:
        """Wait until every node's CLUSTER SLOTS names the target for the slot (gossip has settled)."""
        deadline = time.monotonic() + _AGREE_TIMEOUT_S
        while True:
            owners = set()
            for port in self.masters:
                with self._client(port) as client:
                    for start, end, master, *_ in _command(client, "CLUSTER", "SLOTS"):
                        if int(start) <= self.slot <= int(end):
                            owners.add(int(master[1]))
            if owners == {self.target_port}:
                return
            if time.monotonic() > deadline:
                raise ReshardError(f"slot {self.slot}: the nodes name {sorted(owners)} as its owner")
            time.sleep(0.02)

    def run(self) -> None:
        """The whole move at once: begin, every key, finish."""
        self.begin()
        self.finish()


async def move_slot(
    cluster: RedisClusterProcesses, slot: int, to_port: int, pause_s: float = 0.002, batch: int = 100
) -> int:
    """Move ``slot`` to the master on ``to_port`` key by key (as ``redis-cli --cluster reshard``), the
    blocking calls in a thread and ``pause_s`` between keys for the traffic; the keys moved."""
    migration = await asyncio.to_thread(SlotMigration, cluster, slot, to_port)
    await asyncio.to_thread(migration.begin)
    moved = 0
    while pending := await asyncio.to_thread(migration.pending, batch):
        for key in pending:
            moved += await asyncio.to_thread(migration.move, key)
            await asyncio.sleep(pause_s)
    await asyncio.to_thread(migration.finish)
    return moved
