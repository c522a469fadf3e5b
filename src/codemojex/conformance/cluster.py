"""The cluster schedule: the conformance run on a real three-master Redis Cluster that the harness starts,
while the bus's slot (and with it every game key, which shares the bus's hash tag) moves to another
master and back, key by key, as ``redis-cli --cluster reshard`` moves it (:mod:`echomq.testing.reshard`).

Players, workers, sweeps and the web host keep running through every step of every move; the checks at
the end run on the master that serves the slot again. What this adds to the other faults: a script can
find a key it builds on the other node mid-move, and a call can be refused (ASK, TRYAGAIN) until the
move ends; neither may lose, double or strand a guess.
"""

from __future__ import annotations

import asyncio
import contextlib

from codemojex.conformance.history import History
from echomq.keyspace import Keyspace
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import SlotMigration, slot_of, slot_owner

MASTERS = 3
STEP_PAUSE_S = 0.001  # between two MIGRATEs: a breath for the traffic, not a wait (moves stay short)
# Between two moves the slot rests on one master this long: while a slot is mid-move, Redis refuses a
# script whose keys are split between the two nodes (TRYAGAIN) and the caller retries, so moves back
# to back would leave the game only the instants between them to make progress.
REST_S = 0.5


def start(stack: contextlib.ExitStack, tag: str) -> tuple[RedisClusterProcesses, str]:
    """Start the cluster; it and the URL of the master that serves ``tag``'s slot."""
    nodes = RedisClusterProcesses(MASTERS).start()
    stack.callback(nodes.close)
    port = slot_owner(nodes, slot_of(Keyspace(tag).ring))
    return nodes, f"redis://127.0.0.1:{port}/0"


async def _move(nodes: RedisClusterProcesses, slot: int, to_port: int) -> int:
    """One move of ``slot`` to ``to_port``, one key per MIGRATE; how many keys moved."""
    migration = SlotMigration(nodes, slot, to_port)
    await asyncio.to_thread(migration.begin)
    moved = 0
    while pending := await asyncio.to_thread(migration.pending, 200):
        for key in pending:
            moved += await asyncio.to_thread(migration.move, key)
            await asyncio.sleep(STEP_PAUSE_S)
    await asyncio.to_thread(migration.finish)
    return moved


async def reshard_until(
    nodes: RedisClusterProcesses, tag: str, stop: asyncio.Event, history: History
) -> None:
    """Move the bus's slot to another master and back, again and again until ``stop`` is set (at least
    once there and back), resting REST_S after each move; it ends on the master it started on. Each move
    counts as a ``reshard`` fault."""
    slot = slot_of(Keyspace(tag).ring)
    home = slot_owner(nodes, slot)
    away = next(port for port in nodes.ports if port != home)
    while True:
        for target in (away, home):
            await _move(nodes, slot, target)
            history.faults["reshard"] += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), REST_S)
        if stop.is_set():
            return
