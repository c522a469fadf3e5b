"""One conformance run: players submit guesses against real ``codemojex worker`` processes and a real
Redis while a fault schedule breaks things; at the end the invariants are checked and a report made.

:class:`Run` sets the run up from its :class:`~.schedule.Config`: the Redis (one server of its own on an
AOF, a Redis of the caller's own, or a cluster), the proxy the workers reach it through, the round and
its players (:mod:`.players`), the worker processes (:mod:`.pool`); then the players play while the
:class:`~.faults.Injector` breaks things, the queue drains, and the checks run (:mod:`.invariants`,
:mod:`.observers`) into a :class:`~.report.Report`.

With ``cluster`` the harness starts a three-master Redis Cluster instead of one server, and moves the
bus's slot to another master and back, key by key, for as long as the players play (``reshard`` in the
report; :mod:`.cluster`), and with the ``failover`` kind fails the slot's master over between the moves
(one replica per master, durable admission); Redis crashes and cuts are left out there.

Players retry a submit that got no answer with the same JOB id (an idempotent client), and resubmit a
share of their answered guesses on purpose (duplicates). The workers (:mod:`.worker`) record each handler
start and fail a share of first deliveries (retries with backoff). Beside the end's checks, memory is
sampled during the run (:mod:`.memory`), and after the drain a quiet phase measures punctuality with
idle workers (:mod:`.punctuality`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import redis

from codemojex.conformance import flow, invariants
from codemojex.conformance.cluster import ClusterSchedule
from codemojex.conformance.faults import Injector
from codemojex.conformance.history import History
from codemojex.conformance.invariants import Client
from codemojex.conformance.observers import Bounds, Observers
from codemojex.conformance.players import Players
from codemojex.conformance.pool import WorkerPool, held_by
from codemojex.conformance.punctuality import Quiet, QuietPhase
from codemojex.conformance.report import Report
from codemojex.conformance.schedule import SETTINGS, Config, with_socket_timeout
from codemojex.conformance.starts import is_probe
from codemojex.game import Game
from codemojex.keys import GameKeys
from echomq.keyspace import Keyspace
from echomq.testing.proxy import Proxy
from echomq.testing.server import RedisProcess


@dataclass(frozen=True, slots=True)
class Ending:
    """How the run ended, for the checks."""

    round_id: str
    players: list[str]
    drained: bool
    seconds: float
    restarts: int


class Run:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.history = History()
        self.server: RedisProcess | None = None
        self.proxy: Proxy | None = None
        self.url = ""
        self.keys = Keyspace(config.tag)
        self.ending: Ending | None = None
        self.cluster: ClusterSchedule | None = None  # the cluster schedule's
        self.players = Players(config, self.history)
        settings = config.bus_settings()
        bounds = Bounds(
            settings.result_ttl_ms,
            config.memory_window_ms,
            config.memory_slack,
            int(config.sweep_every_s * 1000),
        )
        self.observers = Observers(self.keys, bounds)
        self.named = flow.NamedTasks(config.tasks) if config.flow else None  # --flow: named tasks too
        self.flow_outcome: tuple[list[str], dict[str, Any]] = ([], {})

    # -- set-up ----------------------------------------------------------------------------------------

    def _start_redis(self, stack: contextlib.ExitStack) -> None:
        if self.config.cluster:  # the processes start from a master that never fails nor holds the slot
            failover = self.config.wait_replicas > 0  # the failover kind, with durable admission
            self.cluster = ClusterSchedule(stack, self.config.tag, failover=failover)
            self.url = self.cluster.url
            return
        if self.config.redis_url:
            self.url = self.config.redis_url
            return
        self.server = RedisProcess(appendonly=True, appendfsync=self.config.appendfsync)
        self.server.start()
        stack.callback(self.server.close)
        self.url = self.server.url

    def _worker_url(self) -> str:
        parsed = urlparse(self.url)
        if self.config.cluster:  # a cluster client talks to the addresses the nodes announce: no proxy
            return self.url
        if "cut" not in self.config.kinds or parsed.scheme != "redis" or parsed.port is None:
            return self.url
        self.proxy = Proxy(parsed.port, target_host=parsed.hostname or "127.0.0.1").start()
        return self.proxy.url.replace("/0", parsed.path or "/0")

    # -- the end ---------------------------------------------------------------------------------------

    async def _drained(self, client: Client) -> bool:
        deadline = time.monotonic() + self.config.drain_timeout_s
        while time.monotonic() < deadline:
            try:
                busy = sum(
                    int(client.zcard(getattr(self.keys, name))) for name in ("active", "delayed")
                ) + int(client.llen(self.keys.ring))
            except redis.RedisError:
                busy = 1
            if busy == 0:
                return True
            await asyncio.sleep(0.2)
        return False

    async def execute(self) -> Report:
        started = time.monotonic()
        with contextlib.ExitStack() as stack:
            self._start_redis(stack)
            worker_url = self._worker_url()
            if self.proxy is not None:
                stack.callback(self.proxy.close)
            # The checks read the slot's master (at the end, again), the cluster's wherever it is now.
            client = self.cluster.client if self.cluster else redis.Redis.from_url(self.url, socket_timeout=5)
            stack.callback(client.close)
            c = self.config
            url = with_socket_timeout(self.url, c.socket_timeout_s)
            settings = dataclasses.replace(SETTINGS, max_attempts=c.max_attempts)
            async with Game.from_url(
                url, c.tag, settings, c.bus_settings(), max_connections=400, cluster=c.cluster
            ) as game:
                if c.flow:
                    await flow.switch_on(game.bus, c)
                round_id, keyboard, secret, joined = await self.players.join(game)
                pool = WorkerPool(
                    with_socket_timeout(worker_url, c.socket_timeout_s), c, self.history, self.rng
                )
                pool.client, pool.starts_dir = client, str(self.observers.starts_dir)
                if self.config.http_share > 0:
                    stack.enter_context(self.players.web_host(self.url))
                    await self.players.host_ready()
                try:
                    drained = await self.observers.during(
                        client,
                        self._play_under_faults(game, pool, client, round_id, (keyboard, secret, joined)),
                    )
                    if self.named is not None:
                        right = await self.named.collect(game.bus, c.drain_timeout_s)
                        self.flow_outcome = await flow.check(game.bus, c, self.named, right)
                    if drained and c.quiet:
                        self.observers.quiet = await self._quiet_phase(pool, game, client)
                finally:
                    await pool.stop()  # also when the run failed: no worker process outlives it
            self.ending = Ending(round_id, joined, drained, time.monotonic() - started, pool.restarts)
            return self._check(client, self.ending)

    async def _quiet_phase(self, pool: WorkerPool, game: Game, client: Client) -> Quiet:
        c = self.config
        return await QuietPhase(
            pool,
            game.bus,
            client,
            self.observers.starts_dir,
            c.concurrency,
            c.workers,
            c.lease_ms,
            held_by=lambda pid: held_by(client, self.keys, pid),
        ).run()

    async def _play_under_faults(
        self, game: Game, pool: WorkerPool, client: Client, round_id: str, arena: tuple[Any, Any, list[str]]
    ) -> bool:
        """The players and the faults together, then the drain; whether the queue drained."""
        keyboard, secret, joined = arena
        for _ in range(self.config.workers):
            pool.spawn()
        pool.supervisor = asyncio.create_task(pool.supervise())
        stop = asyncio.Event()
        faults = Injector(self.config, self.rng, self.history, self.keys, self.url, self.server, self.proxy)
        injector = asyncio.create_task(faults.run(pool, client, stop))
        moves = asyncio.create_task(self._reshard(stop))
        plans = self.players.plans(self.rng, keyboard, secret, joined)
        named = [self.named.send(game.bus, 0.02)] if self.named is not None else []
        try:
            await asyncio.gather(
                *(
                    self.players.play(game, round_id, player, plan)
                    for player, plan in zip(joined, plans, strict=True)
                ),
                *named,
            )
        finally:
            stop.set()
            await injector
            await moves  # the slot is back on the master it started on
        await pool.replace_all(armed=False)  # the drain: workers with no fault points armed
        return await self._drained(client)

    async def _reshard(self, stop: asyncio.Event) -> None:
        if self.cluster is not None:
            await self.cluster.run_until(stop, self.history)

    def execute_blocking(self) -> Report:
        return asyncio.run(self.execute())

    def recheck(self) -> Report:
        """The checks again, on the Redis of ``redis_url`` as it is now (after a run against a Redis of
        the caller's own, which outlives the run)."""
        if self.ending is None or not self.config.redis_url:
            raise RuntimeError("recheck needs a finished run against a Redis of the caller's own")
        client = redis.Redis.from_url(self.config.redis_url, socket_timeout=5)
        try:
            return self._check(client, self.ending)
        finally:
            client.close()

    def _check(self, client: Client, ending: Ending) -> Report:
        round_id, joined, drained = ending.round_id, ending.players, ending.drained
        keys = GameKeys(self.config.tag)
        rows = invariants.job_rows(client, self.keys)
        state = invariants.read_game(client, keys, round_id, joined)
        violations = [] if drained else ["the queue did not drain within the drain timeout"]
        violations += invariants.queue_structure(client, self.keys, rows)
        once, figures = invariants.exactly_once(state, rows, self.history.acknowledged)
        violations += once
        violations += invariants.wallets(client, keys, state, rows)
        violations += invariants.economy(client, keys, round_id, state, SETTINGS)
        violations += invariants.leaderboard(state)
        violations += self.history.problems
        violations += self.flow_outcome[0]
        if self.history.problems and self.players.host_log is not None:
            violations.append(f"the web host's output is in {self.players.host_log}")
        if self.config.appendfsync == "always" and figures["vanished"]:
            violations.append(f"{figures['vanished']} acknowledged guesses vanished with appendfsync always")
        observed, memory_figures, punctual = self.observers.check(
            client, rows, self.history.lost_holders, self.history.kills
        )
        violations += observed
        counters = {k.decode(): int(v) for k, v in client.hgetall(self.keys.stats).items()}
        recoveries = []  # a dead worker's job, from its death to its finish by another delivery
        for died_at, held in self.history.kills:
            for job, token in held:
                row = rows.get(job, {})
                if row.get("finished") and int(row.get("attempts", "0")) > token:
                    recoveries.append(int(row["finished"]) - died_at)
        return Report(
            config=asdict(self.config),
            seconds=ending.seconds,
            submit_calls=dict(self.history.calls),
            acknowledged=len(self.history.acknowledged),
            duplicates_absorbed=self.history.calls["duplicate"],
            over_http=self.history.over_http,
            idempotent_retries=self.history.retried_after_error + self.history.http_retried,
            faults=dict(self.history.faults),
            worker_exits=dict(self.history.worker_exits),
            worker_restarts=ending.restarts,
            redeliveries=sum(
                1 for row in rows.values() if int(row.get("attempts", "0")) > 1 and not is_probe(row["lane"])
            ),
            reclaimed=counters.get("reclaimed", 0),
            stale_refused=counters.get("stale", 0),
            leases_revoked=counters.get("revoked", 0),
            recovery_ms=sorted(recoveries),
            scored=len(state.records),
            lost=figures["lost"],
            double=figures["double"],
            dead=figures["dead"],
            vanished=figures["vanished"],
            violations=violations,
            memory=memory_figures,
            punctuality=punctual,
            retried=counters.get("retried", 0),
            flow=self.flow_outcome[1],
        )


def run(config: Config) -> Report:
    """One run, start to report (blocking); its handler-start files are removed after the checks."""
    the_run = Run(config)
    try:
        return the_run.execute_blocking()
    finally:
        the_run.observers.close()


def write(report: Report, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.to_json())
