"""The cluster schedule: the conformance run on a real three-master Redis Cluster that the harness starts,
while the bus's slot (and with it every game key, which shares the bus's hash tag) moves to another
master and back, key by key, as ``redis-cli --cluster reshard`` moves it (:mod:`echomq.testing.reshard`).

Players, workers, sweeps and the web host keep running through every step of every move; the checks at
the end run on the master that serves the slot again. What this adds to the other faults: a script can
find a key it builds on the other node mid-move, and a call can be refused (ASK, TRYAGAIN) until the
move ends; neither may lose, double or strand a guess.

``failover`` (a fault kind of this schedule only): the cluster gets one replica per master, and between
the moves the master that serves the slot is SIGKILLed, the cluster promotes its replica, and the old
master is started again and follows it as a replica (:meth:`RedisClusterProcesses.fail_over` and
``rejoin``). Redis replicates asynchronously, so the run admits durably (the bus's ``wait_replicas=1``:
a guess is acknowledged once the replica holds it, :mod:`codemojex.game`), and the checks still demand
that no acknowledged guess is lost and none scored twice; a score the dead master had not passed on is
lost whole, with its completion, and redone once. Until the old master is back the promoted one has no
replica, so every admission is refused NotDurable and retried with its JOB id. The processes of the
run reach the cluster through a master that never fails (nor holds the slot); the checks' client
follows the slot's master (:class:`SlotClient`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import redis

from codemojex.conformance.history import History
from echomq.keyspace import Keyspace
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import move_slot, slot_of, slot_owner

MASTERS = 3
STEP_PAUSE_S = 0.001  # between two MIGRATEs: a breath for the traffic, not a wait (moves stay short)
# Between two moves the slot rests on one master this long: while a slot is mid-move, Redis refuses a
# script whose keys are split between the two nodes (TRYAGAIN) and the caller retries, so moves back
# to back would leave the game only the instants between them to make progress.
REST_S = 0.5


class SlotClient:
    """A blocking client to the master that serves the bus's slot, pointed anew after a failover (the
    checks and the observers read the slot's keys and its node's memory through it)."""

    def __init__(self, port: int) -> None:
        self._client = redis.Redis(port=port, socket_timeout=5)
        self._old: list[redis.Redis] = []

    def retarget(self, port: int) -> None:
        self._old.append(self._client)  # a sampler thread may be using it: closed at the end
        self._client = redis.Redis(port=port, socket_timeout=5)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def close(self) -> None:
        for client in (*self._old, self._client):
            client.close()


class ClusterSchedule:
    """The run's cluster and what happens to it while the players play."""

    def __init__(self, stack: contextlib.ExitStack, tag: str, *, failover: bool) -> None:
        self.nodes = RedisClusterProcesses(MASTERS, replicas=1 if failover else 0).start()
        stack.callback(self.nodes.close)
        self.failover = failover
        self.slot = slot_of(Keyspace(tag).ring)
        home = slot_owner(self.nodes, self.slot)
        # The slot moves between its master (whichever that is after a failover) and `away`; `entry`
        # neither holds it nor fails: the run's cluster clients start from it.
        self.away, self.entry = (port for port in self.nodes.ports if port != home)
        self.url = f"redis://127.0.0.1:{self.entry}/0"
        self.client = SlotClient(home)
        stack.callback(self.client.close)

    async def _move(self, to_port: int) -> int:
        """One move of the slot to ``to_port``, one key per MIGRATE; how many keys moved."""
        return await move_slot(self.nodes, self.slot, to_port, STEP_PAUSE_S, batch=200)

    async def _fail_over(self, history: History) -> None:
        """SIGKILL the slot's master, wait for its replica's promotion, start it again as a replica."""
        victim = await asyncio.to_thread(slot_owner, self.nodes, self.slot)
        history.faults["failover"] += 1
        promoted = await asyncio.to_thread(self.nodes.fail_over, victim)
        self.client.retarget(promoted)
        await asyncio.to_thread(self.nodes.rejoin, victim)

    async def run_until(self, stop: asyncio.Event, history: History) -> None:
        """Until ``stop`` is set (and at least once): a failover (with ``failover``), then the slot to
        ``away`` and back, resting REST_S after each; it ends on the slot's master. Each move counts as
        a ``reshard`` fault."""
        while True:
            if self.failover:
                await self._fail_over(history)
                await _rest(stop)
            home = await asyncio.to_thread(slot_owner, self.nodes, self.slot)  # promoted, after one
            for target in (self.away, home):
                await self._move(target)
                history.faults["reshard"] += 1
                await _rest(stop)
            if stop.is_set():
                return


async def _rest(stop: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), REST_S)
