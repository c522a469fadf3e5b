"""The run's worker processes (:mod:`.worker`): started with the run's settings, replaced when they die
until the pool stops, retired (SIGTERM) or killed on purpose, and told apart by how they ended.

Two fault kinds live in a worker's environment, so the pool arms them when it starts one: ``boundary``
(the fault points of :data:`BOUNDARY_POINTS` and the game's, at the run's ``boundary_rate``) and
``skew`` (a clock shifted by up to an hour). :func:`held_by` reads what a dead worker held.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import redis

from codemojex import faults as game_faults
from codemojex.conformance.history import History
from codemojex.conformance.invariants import Client
from codemojex.conformance.punctuality import QUIET_SWEEP_S
from codemojex.conformance.schedule import Config
from codemojex.conformance.starts import is_ready
from echomq import rows as bus_rows
from echomq.keyspace import Keyspace
from echomq.testing.server import die_with_parent
from echomq.worker import faults as bus_faults

BOUNDARY_POINTS = ("worker.after_claim", "worker.mid_handler", "worker.mid_extend")


def _now_ms(client: Client) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


@dataclass
class WorkerPool:
    """The worker processes, restarted when they die until the pool stops."""

    url: str
    config: Config
    history: History
    rng: random.Random
    armed: bool = True
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed_by_us: set[int] = field(default_factory=set)
    retired: set[int] = field(default_factory=set)  # stopped on purpose (SIGTERM) for the drain
    stopping: bool = False
    restarts: int = 0
    client: Client | None = None  # to read what a worker that killed itself held
    supervisor: asyncio.Task[None] | None = None
    starts_dir: str = ""  # where the workers record their handler starts (see .starts)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for name in (bus_faults.ENV, game_faults.ENV, bus_faults.SKEW_ENV):
            env.pop(name, None)
        kinds = self.config.kinds
        if self.armed and "boundary" in kinds:
            rate = self.config.boundary_rate
            env[bus_faults.ENV] = ",".join(f"{point}@{rate}" for point in BOUNDARY_POINTS)
            env[game_faults.ENV] = f"score.after_effect@{rate}"
        if "skew" in kinds:
            env[bus_faults.SKEW_ENV] = str(self.rng.randint(-3_600_000, 3_600_000))
            self.history.faults["skew"] += 1
        env[bus_faults.SEED_ENV] = str(self.rng.random())
        return env

    def spawn(
        self,
        *,
        concurrency: int | None = None,
        sweep_every_s: float | None = None,
        fail_rate: float | None = None,
        backoff_base_ms: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """A worker process (:mod:`.worker`): the run's settings unless told otherwise."""
        c = self.config
        argv = [sys.executable, "-m", "codemojex.conformance.worker", "--redis-url", self.url]
        argv += ["--tag", c.tag, "--starts", self.starts_dir, "--lease-ms", str(c.lease_ms)]
        argv += ["--concurrency", str(concurrency or c.concurrency), "--grace", "2"]
        argv += ["--sweep-every", str(sweep_every_s or c.sweep_every_s)]
        argv += ["--fail-rate", str(c.fail_rate if fail_rate is None else fail_rate)]
        argv += ["--backoff-base-ms", str(backoff_base_ms or c.backoff_base_ms)]
        argv += ["--seed", str(self.rng.random())]
        if c.flow:
            argv += ["--tasks"]
        if c.result_ttl_ms is not None:
            argv += ["--result-ttl-ms", str(c.result_ttl_ms)]
        if c.dedup_window_ms is not None:
            argv += ["--dedup-window-ms", str(c.dedup_window_ms)]
        if c.cluster:
            argv += ["--cluster"]
        process = subprocess.Popen(  # dies with the harness, however it ends: no orphan worker
            argv,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl)
        )
        self.processes.append(process)
        return process

    def spawn_quiet(
        self, *, concurrency: int | None = None, backoff_base_ms: int | None = None
    ) -> subprocess.Popen[bytes]:
        """A worker for the quiet phase: no fault points, no failures but the probes', its own period."""
        return self.spawn(
            concurrency=concurrency,
            sweep_every_s=QUIET_SWEEP_S,
            fail_rate=0.0,
            backoff_base_ms=backoff_base_ms,
        )

    async def retire_all(self) -> None:
        """Stop every worker (SIGTERM: they release their jobs); none is replaced."""
        await self._retire(self.live())

    async def _retire(self, processes: list[subprocess.Popen[bytes]]) -> None:
        """Stop ``processes`` on purpose (SIGCONT first, in case one is stalled; then SIGTERM) and wait."""
        for process in processes:
            self.retired.add(process.pid)
            process.send_signal(signal.SIGCONT)
            process.terminate()
        for process in processes:
            await asyncio.to_thread(reap, process)

    async def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL ``process`` (not replaced); what it held stays active under its name."""
        self.retired.add(process.pid)
        self.killed_by_us.add(process.pid)
        self.history.lost_holders.add(process.pid)
        process.kill()
        await asyncio.to_thread(process.wait)

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None]

    async def supervise(self) -> None:
        while not self.stopping:
            for process in list(self.processes):
                code = process.poll()
                if code is None:
                    continue
                self.processes.remove(process)
                if process.pid in self.retired:
                    self.history.worker_exits["stopped for the drain"] += 1
                elif process.pid in self.killed_by_us:
                    self.history.worker_exits["killed by the harness"] += 1
                elif code == -signal.SIGKILL:
                    self.history.worker_exits["killed itself at a fault point"] += 1
                    self.history.lost_holders.add(process.pid)
                    self.history.faults["boundary"] += 1
                    if self.client is not None:
                        held = await asyncio.to_thread(
                            held_by, self.client, Keyspace(self.config.tag), process.pid
                        )
                        if held is not None:
                            self.history.kills.append(held)
                else:
                    self.history.worker_exits[f"exited {code}"] += 1
                if self.restart_wanted(process):
                    self.restarts += 1
                    self.spawn()
            await asyncio.sleep(0.1)

    def restart_wanted(self, process: subprocess.Popen[bytes]) -> bool:
        """A dead worker is replaced, unless the pool is stopping or it was retired on purpose."""
        return not self.stopping and process.pid not in self.retired

    async def replace_all(self, *, armed: bool) -> None:
        """Start fresh workers, and once they claim, stop the old ones (SIGTERM: they release their
        jobs): no moment without a worker, so no due job waits for a process to start."""
        self.armed = armed
        old = self.live()
        fresh = [self.spawn().pid for _ in range(self.config.workers)]
        await self.ready(fresh)
        await self._retire(old)

    async def ready(self, pids: list[int], within_s: float = 60.0) -> bool:
        """Wait until the workers ``pids`` reached their claiming loop (or died, or ``within_s`` passed)."""
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            alive = {p.pid for p in self.live()}
            if all(is_ready(self.starts_dir, pid) for pid in set(pids) & alive):
                return True
            await asyncio.sleep(0.05)
        return False

    async def stop(self) -> None:
        self.stopping = True
        if self.supervisor is not None:
            await self.supervisor
        for process in self.live():
            process.send_signal(signal.SIGCONT)
            process.terminate()
        for process in self.processes:
            await asyncio.to_thread(reap, process)


def held_by(client: Client, keys: Keyspace, pid: int) -> tuple[int, list[tuple[str, int]]] | None:
    """(server ms, the active jobs the worker ``pid`` holds with their attempts token), or None if Redis
    cannot be read at this moment (no recovery time is measured for that death)."""
    try:
        now = _now_ms(client)
        held = []
        for raw in client.zrange(keys.active, 0, -1):
            owner, attempts = client.hmget(keys.job(raw.decode()), bus_rows.OWNER, bus_rows.ATTEMPTS)
            if owner is not None and owner.decode().endswith(f":{pid}"):
                held.append((raw.decode(), int(attempts or 0)))
    except redis.RedisError:
        return None
    return now, held


def reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for ``process`` to end (15 s), else SIGKILL it and wait again."""
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
