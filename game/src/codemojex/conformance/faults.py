"""The faults a conformance run causes, and the driver that injects them while the players play.

The kinds (each can be left out with the config's ``kinds``):

``kill``
    SIGKILL a random worker process, at whatever point of its job cycle it happens to be.
``boundary``
    every worker runs with the named fault points armed at ``boundary_rate`` (``ECHOMQ_FAULTS``: after a
    claim, mid-handler, mid-extension; ``CODEMOJEX_FAULTS``: after the effect, before the acknowledgement),
    so it kills itself exactly at those boundaries now and then.
``stall``
    SIGSTOP a worker for 2.5 leases, then SIGCONT it: its lease is reaped and re-claimed meanwhile, and
    what it finishes afterwards is refused as stale.
``redis``
    SIGKILL the Redis server and restart it on its AOF (only a server the harness started). With
    ``appendfsync always`` no acknowledged write may be lost; with ``everysec`` the loss is counted.
``cut``
    cut the TCP link between the workers and Redis (a loopback proxy), as a reset or a blackhole, then
    restore it.
``sweeps``
    run the sweep from three ``echomq sweep`` processes at once.
``pause``
    SIGSTOP the Redis server for 1.5 socket timeouts (the harness gives every client of the run a short
    one), then SIGCONT: a slow fsync, a swapped host. Commands sent meanwhile run when Redis resumes,
    after their callers gave up on the reply (a lost reply).
``skew``
    start each worker with its clock shifted by up to an hour either way (``ECHOMQ_CLOCK_SKEW_MS``).

``failover``
    (the cluster schedule only, :mod:`.cluster`) SIGKILL the master that serves the bus's slot, wait for
    its replica's promotion, start it again as that replica's replica; the run admits durably meanwhile.

``kill``, ``stall``, ``redis``, ``cut``, ``sweeps`` and ``pause`` are :data:`INJECTED` by the
:class:`Injector` at random, in turns weighted by :data:`WEIGHTS`; ``boundary`` and ``skew`` are armed in
each worker's environment when the pool starts it (:mod:`.pool`); ``failover`` is run by the cluster
schedule between its slot moves (``reshard`` in the report), never by the injector.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from codemojex.conformance.history import History
from codemojex.conformance.invariants import Client
from codemojex.conformance.pause import pause
from codemojex.conformance.pool import WorkerPool, held_by, reap
from codemojex.conformance.schedule import Config
from echomq.keyspace import Keyspace
from echomq.testing.proxy import Proxy
from echomq.testing.server import RedisProcess

INJECTED = ("kill", "stall", "redis", "cut", "sweeps", "pause")  # what the injector picks from, at random
# How many of each injected kind a turn of the schedule holds: kills are cheap and the most telling;
# a Redis crash (an AOF replay that grows with the run) is the most expensive, so once a turn.
WEIGHTS = {"kill": 4, "stall": 1, "redis": 1, "cut": 1, "sweeps": 1, "pause": 1}


@dataclass
class Injector:
    """Injects the run's faults at its pace until told to stop (and each kind at least once)."""

    config: Config
    rng: random.Random
    history: History
    keys: Keyspace
    url: str  # of the Redis the run's checks read (not the workers' proxied link)
    server: RedisProcess | None  # the Redis the run started (to crash and pause), or None
    proxy: Proxy | None  # between the workers and Redis (to cut), or None
    errors: list[BaseException] = field(default_factory=list)
    one_at_a_time: dict[str, asyncio.Lock] = field(
        default_factory=lambda: {"redis": asyncio.Lock(), "cut": asyncio.Lock()}
    )

    async def run(self, pool: WorkerPool, client: Client, stop: asyncio.Event) -> None:
        kinds = [kind for kind in INJECTED if kind in self.config.kinds]
        if self.server is None:
            kinds = [kind for kind in kinds if kind not in ("redis", "pause")]
        if self.proxy is None:
            kinds = [kind for kind in kinds if kind != "cut"]
        pending: set[asyncio.Task[None]] = set()
        turn: list[str] = []
        # Until the players are done, and in any case until every kind was injected once (however short
        # the run, its report covers each kind it names). Injected, not drawn: a Redis crash drawn while
        # a pause holds the Redis lock is skipped, and must come again.
        while kinds and (not stop.is_set() or not set(kinds) <= self._injected()):
            pause = self.config.fault_every_s * (0.5 + self.rng.random())
            if stop.is_set():
                await asyncio.sleep(pause)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                if stop.is_set():
                    continue
            if not turn:  # every kind in each turn, in a random order
                turn = [kind for kind in kinds for _ in range(WEIGHTS[kind])]
                self.rng.shuffle(turn)
            kind = turn.pop()
            if stop.is_set() and kind in self._injected():
                continue
            task = asyncio.create_task(self._fault(kind, pool, client))
            pending.add(task)
            task.add_done_callback(self._settled(pending))
        await asyncio.gather(*pending)
        if self.errors:  # a fault the harness could not carry out (e.g. Redis would not restart)
            raise self.errors[0]

    def _injected(self) -> set[str]:
        return {kind for kind, count in self.history.faults.items() if count}

    def _settled(self, pending: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
        def done(task: asyncio.Task[None]) -> None:
            pending.discard(task)
            if not task.cancelled() and task.exception() is not None:
                self.errors.append(task.exception())  # type: ignore[arg-type]

        return done

    async def _fault(self, kind: str, pool: WorkerPool, client: Client) -> None:
        live = pool.live()
        if kind in ("kill", "stall") and not live:
            return
        lock = self.one_at_a_time.get("redis" if kind == "pause" else kind)
        if lock is not None and lock.locked():
            return  # one Redis crash (or cut) at a time: a second would land on the restart, not on Redis
        self.history.faults[kind] += 1
        if kind == "kill":
            victim = self.rng.choice(live)
            pool.killed_by_us.add(victim.pid)
            self.history.lost_holders.add(victim.pid)
            victim.kill()
            await asyncio.to_thread(victim.wait)  # dead: what it held stays active under its name
            held = await asyncio.to_thread(held_by, client, self.keys, victim.pid)
            if held is not None:
                self.history.kills.append(held)
        elif kind == "stall":
            victim = self.rng.choice(live)
            self.history.lost_holders.add(victim.pid)  # what it holds may expire on its last try
            victim.send_signal(signal.SIGSTOP)
            await asyncio.sleep(2.5 * self.config.lease_ms / 1000)
            victim.send_signal(signal.SIGCONT)
        elif kind == "redis":
            assert self.server is not None
            async with self.one_at_a_time[kind]:  # a crash overlapping a restart is not a crash to survive
                await asyncio.to_thread(self.server.kill)
                await asyncio.sleep(0.2)
                await asyncio.to_thread(self.server.start)  # on the same AOF; raises if it cannot
        elif kind == "cut":
            assert self.proxy is not None
            async with self.one_at_a_time[kind]:
                self.proxy.cut(self.rng.choice(("reset", "blackhole")))
                await asyncio.sleep(0.3 + 0.7 * self.rng.random())
                self.proxy.restore()
        elif kind == "sweeps":
            env = dict(os.environ, REDIS_URL=self.url)
            argv = [sys.executable, "-m", "echomq.cli", "--tag", self.config.tag, "sweep"]
            argv[3:3] = ["--cluster"] if self.config.cluster else []
            await asyncio.to_thread(_sweep_from_processes, argv, env, 3)
        elif kind == "pause":
            assert self.server is not None
            assert self.server.process is not None
            async with self.one_at_a_time["redis"]:  # one Redis fault at a time: a crash or a pause
                await pause(self.server.process, 1.5 * self.config.socket_timeout_s)


def _sweep_from_processes(argv: list[str], env: dict[str, str], count: int) -> None:
    """``count`` sweep processes started together, waited for together."""
    sweepers = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    for sweeper in sweepers:
        reap(sweeper)
