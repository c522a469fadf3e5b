"""One conformance run: players submit guesses against real ``codemojex worker`` processes and a real
Redis while a fault schedule breaks things; at the end the invariants are checked and a report made.

The faults (each kind can be left out with ``kinds``):

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

With ``cluster`` the harness starts a three-master Redis Cluster instead of one server, and moves the
bus's slot to another master and back, key by key, for as long as the players play (``reshard`` in the
report; :mod:`.cluster`); Redis crashes and cuts are left out there.

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
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import redis

from codemojex import faults as game_faults
from codemojex import players as game_players
from codemojex import rounds, wallet
from codemojex.conformance import KINDS, invariants
from codemojex.conformance import cluster as cluster_schedule
from codemojex.conformance.history import History
from codemojex.conformance.http import HttpPlayer
from codemojex.conformance.invariants import Client
from codemojex.conformance.observers import Bounds, Observers
from codemojex.conformance.pause import pause
from codemojex.conformance.punctuality import QUIET_SWEEP_S, Quiet, QuietPhase
from codemojex.conformance.report import Report
from codemojex.conformance.starts import is_probe, is_ready
from codemojex.errors import CodemojexError
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome, submit
from codemojex.keys import JOB, GameKeys
from echomq import Settings, ids
from echomq.keyspace import Keyspace
from echomq.testing.proxy import Proxy
from echomq.testing.server import RedisClusterProcesses, RedisProcess, die_with_parent, free_port
from echomq.worker import faults as bus_faults

INJECTED = ("kill", "stall", "redis", "cut", "sweeps", "pause")  # what the injector picks from, at random
# How many of each injected kind a turn of the schedule holds: kills are cheap and the most telling;
# a Redis crash (an AOF replay that grows with the run) is the most expensive, so once a turn.
WEIGHTS = {"kill": 4, "stall": 1, "redis": 1, "cut": 1, "sweeps": 1, "pause": 1}
BOUNDARY_POINTS = ("worker.after_claim", "worker.mid_handler", "worker.mid_extend")


@dataclass(frozen=True, slots=True)
class Config:
    guesses: int = 2000
    players: int = 20
    workers: int = 3
    concurrency: int = 8
    appendfsync: str = "always"  # of the Redis the harness starts: always | everysec
    fault_every_s: float = 0.4  # the injector's pace
    boundary_rate: float = 0.01  # chance a worker kills itself at each armed boundary it crosses
    duplicate_rate: float = 0.1  # share of answered guesses submitted again on purpose
    lease_ms: int = 1000
    seed: int = 1
    kinds: tuple[str, ...] = KINDS
    redis_url: str | None = None  # a Redis of the user's own: no Redis crashes
    tag: str = "conformance"
    drain_timeout_s: float = 180.0
    http_share: float = 0.25  # of the players submit over HTTP to a web host process, with Idempotency-Key
    cluster: bool = False  # on a 3-master cluster of the harness's own, the bus's slot resharded meanwhile
    max_attempts: int = 25  # of each guess job (1 makes a try spent without a handler run a dead letter)
    socket_timeout_s: float = 1.0  # of every Redis client of the players, host and workers; pause: 1.5x
    sweep_every_s: float = 0.3  # the workers' sweep period (the library's default is 10 s)
    fail_rate: float = 0.02  # share of first deliveries whose handler fails (a retry with backoff)
    backoff_base_ms: int = 400  # the bus's first retry delay (before jitter)
    result_ttl_ms: int | None = None  # the bus's settings (None: the library's default)
    dedup_window_ms: int | None = None
    memory_window_ms: int = 3000  # rows past their TTL may be at most this much of the completions
    memory_slack: int = 200  # ... plus this many
    quiet: bool = True  # the quiet phase after the drain (punctuality with idle workers)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        if self.appendfsync not in ("always", "everysec"):
            raise ValueError("appendfsync is always or everysec")
        if self.cluster and self.redis_url:
            raise ValueError("the cluster schedule starts a cluster of its own: give no Redis URL")
        if not 0.0 <= self.http_share <= 1.0:
            raise ValueError("http_share is in [0, 1]")
        for name in ("guesses", "players", "workers", "concurrency", "lease_ms", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is at least 1")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError("fail_rate is in [0, 1]")
        if self.socket_timeout_s <= 0 or self.sweep_every_s <= 0:
            raise ValueError("socket_timeout_s and sweep_every_s are positive")

    def bus_settings(self) -> Settings:
        given = {"result_ttl_ms": self.result_ttl_ms, "dedup_window_ms": self.dedup_window_ms}
        return Settings(
            backoff_base_ms=self.backoff_base_ms, **{k: v for k, v in given.items() if v is not None}
        )


SETTINGS = GameSettings(max_queued=1_000_000, max_attempts=25, events_cap=1_000_000)


def with_socket_timeout(url: str, seconds: float) -> str:
    """``url`` with redis-py's ``socket_timeout`` query option (every client made from it gets it)."""
    return f"{url}{'&' if '?' in url else '?'}socket_timeout={seconds}"


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
            await asyncio.to_thread(_wait, process)

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
            await asyncio.to_thread(_wait, process)


def held_by(client: Client, keys: Keyspace, pid: int) -> tuple[int, list[tuple[str, int]]] | None:
    """(server ms, the active jobs the worker ``pid`` holds with their attempts token), or None if Redis
    cannot be read at this moment (no recovery time is measured for that death)."""
    try:
        now = _now_ms(client)
        held = []
        for raw in client.zrange(keys.active, 0, -1):
            owner, attempts = client.hmget(keys.job(raw.decode()), "owner", "attempts")
            if owner is not None and owner.decode().endswith(f":{pid}"):
                held.append((raw.decode(), int(attempts or 0)))
    except redis.RedisError:
        return None
    return now, held


def _sweep_from_processes(argv: list[str], env: dict[str, str], count: int) -> None:
    """``count`` sweep processes started together, waited for together."""
    sweepers = [
        subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    for sweeper in sweepers:
        _wait(sweeper)


def _wait(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


@dataclass(frozen=True, slots=True)
class Plan:
    """One player's part: how many guesses, drawn from the keyboard; the last one is the secret when the
    player ``solves`` (a guess of theirs redelivered after the solve was scored must still count)."""

    keyboard: tuple[str, ...]
    secret: tuple[str, ...]
    count: int
    rng: random.Random
    http: bool = False
    solves: bool = False


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
        self.errors: list[BaseException] = []
        self.tokens: dict[str, str] = {}  # player -> API token
        self.one_at_a_time = {"redis": asyncio.Lock(), "cut": asyncio.Lock()}
        self.nodes: RedisClusterProcesses | None = None  # the cluster schedule's
        self.host_port = 0  # the web host process's, when some players play over HTTP
        self.host_log: Path | None = None  # its output (kept when a player saw it break a promise)
        settings = config.bus_settings()
        bounds = Bounds(settings.result_ttl_ms, config.memory_window_ms, config.memory_slack)
        self.observers = Observers(self.keys, bounds)

    # -- set-up ----------------------------------------------------------------------------------------

    def _start_redis(self, stack: contextlib.ExitStack) -> None:
        if self.config.cluster:  # the checks read the master that serves the bus's slot (at the end, again)
            self.nodes, self.url = cluster_schedule.start(stack, self.config.tag)
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

    async def _arena(self, game: Game) -> tuple[str, tuple[str, ...], tuple[str, ...], list[str]]:
        the_round = await rounds.open_round(game)
        secret = await rounds.read_secret(game, the_round.id)
        each = self.config.guesses // self.config.players + 2
        joined = []
        for number in range(self.config.players):
            token = game_players.new_token()
            player = await game_players.register(game, f"player {number}", token=token)
            await wallet.credit(game, player.id, the_round.prices[0][0], each, reason="conformance")
            joined.append(player.id)
            self.tokens[player.id] = token
        return the_round.id, the_round.keyboard.keys, secret, joined

    # -- the players -----------------------------------------------------------------------------------

    async def _submit(self, game: Game, round_id: str, player: str, guess: tuple[str, ...], job: str) -> str:
        """Submit until answered (the same JOB id each time: an idempotent client); the answer."""
        pause = 0.05
        while True:
            try:
                outcome = await submit(game, round_id, player, guess, job_id=job)
            except CodemojexError:  # Redis unreachable, restarting (LOADING), or a cut: retry, same id
                self.history.answered(job, "error")
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            answer = outcome.outcome.value if outcome.outcome is not Outcome.REFUSED else str(outcome.refusal)
            self.history.answered(job, answer)
            return answer

    async def _play(self, game: Game, round_id: str, player: str, plan: Plan) -> None:
        if plan.http:
            await self._play_http(round_id, player, plan)
            return
        rng, secret = plan.rng, plan.secret
        for number in range(plan.count):
            guess = secret
            while guess == secret and not (plan.solves and number == plan.count - 1):
                guess = tuple(rng.choice(plan.keyboard) for _ in secret)  # the secret only as the last
            job = ids.mint(JOB)
            answer = await self._submit(game, round_id, player, guess, job)
            if answer == "admitted" and rng.random() < self.config.duplicate_rate:
                await self._submit(game, round_id, player, guess, job)

    async def _play_http(self, round_id: str, player: str, plan: Plan) -> None:
        """Each guess POSTed with an Idempotency-Key, retried with the same key until answered (a lost
        reply, a 503 while Redis is away); a share sent again on purpose must be the same job."""
        client = HttpPlayer(self.host_port, self.tokens[player])
        path = f"/api/rounds/{round_id}/guesses"
        try:
            for number in range(plan.count):
                guess = plan.secret
                while guess == plan.secret:
                    guess = tuple(plan.rng.choice(plan.keyboard) for _ in plan.secret)
                key = f"{player}-{number}-{plan.rng.random()}"
                job = await self._post_until_answered(client, path, list(guess), key)
                if job and plan.rng.random() < self.config.duplicate_rate:
                    again = await self._post_until_answered(client, path, list(guess), key)
                    if again != job:
                        self.history.problems.append(f"a retry of key {key} got job {again}, not {job}")
        finally:
            await client.close()

    async def _post_until_answered(self, client: HttpPlayer, path: str, guess: list[str], key: str) -> str:
        pause, failed = 0.05, False
        while True:
            try:
                status, body = await client.post(path, {"guess": guess}, {"Idempotency-Key": key})
            except (OSError, asyncio.IncompleteReadError, TimeoutError):
                status, body = 0, {}
            if status == 202:
                job = str(body["job_id"])
                self.history.answered(job, str(body["status"]))
                self.history.http_retried += failed
                self.history.over_http += body["status"] == "admitted"
                return job
            if status not in (0, 503):  # anything but "try again" breaks a promise to this player
                self.history.problems.append(f"POST {path} answered {status}: {body}")
                return ""
            failed = True
            self.history.calls["http error"] += 1
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)

    # -- the faults ------------------------------------------------------------------------------------

    async def _inject(self, pool: WorkerPool, client: Client, stop: asyncio.Event) -> None:
        kinds = [kind for kind in INJECTED if kind in self.config.kinds]
        if self.server is None:
            kinds = [kind for kind in kinds if kind not in ("redis", "pause")]
        if self.proxy is None:
            kinds = [kind for kind in kinds if kind != "cut"]
        pending: set[asyncio.Task[None]] = set()
        turn: list[str] = []
        seen: set[str] = set()
        # Until the players are done, and in any case until every kind was injected once (however short
        # the run, its report covers each kind it names).
        while kinds and (not stop.is_set() or seen != set(kinds)):
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
            if stop.is_set() and kind in seen:
                continue
            seen.add(kind)
            task = asyncio.create_task(self._fault(kind, pool, client))
            pending.add(task)
            task.add_done_callback(self._settled(pending))
        await asyncio.gather(*pending)
        if self.errors:  # a fault the harness could not carry out (e.g. Redis would not restart)
            raise self.errors[0]

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
            client = redis.Redis.from_url(self.url, socket_timeout=5)
            stack.callback(client.close)
            c = self.config
            url = with_socket_timeout(self.url, c.socket_timeout_s)
            settings = dataclasses.replace(SETTINGS, max_attempts=c.max_attempts)
            async with Game.from_url(
                url, c.tag, settings, c.bus_settings(), max_connections=400, cluster=c.cluster
            ) as game:
                round_id, keyboard, secret, joined = await self._arena(game)
                pool = WorkerPool(
                    with_socket_timeout(worker_url, c.socket_timeout_s), c, self.history, self.rng
                )
                pool.client, pool.starts_dir = client, str(self.observers.starts_dir)
                if self.config.http_share > 0:
                    stack.enter_context(self._web_host())
                    await self._host_ready()
                try:
                    drained = await self.observers.during(
                        client,
                        self._play_under_faults(game, pool, client, round_id, (keyboard, secret, joined)),
                    )
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

    @contextlib.contextmanager
    def _web_host(self) -> Iterator[None]:
        """The web host in a process of its own, on Redis directly (the proxy is the workers' link)."""
        self.host_port = free_port()
        url = with_socket_timeout(self.url, self.config.socket_timeout_s)
        argv = [sys.executable, "-m", "codemojex.web", "--redis-url", url, "--tag", self.config.tag]
        argv += ["--cluster"] if self.config.cluster else []
        argv += ["--port", str(self.host_port), "--max-queued", str(SETTINGS.max_queued)]
        argv += ["--max-attempts", str(self.config.max_attempts)]
        self.host_log = Path(tempfile.mkdtemp(prefix="conformance-")) / "host.log"
        with self.host_log.open("wb") as log:
            host = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            try:
                yield
            finally:
                host.terminate()
                _wait(host)

    async def _host_ready(self) -> None:
        probe = HttpPlayer(self.host_port, "")
        try:
            for _ in range(300):
                try:
                    status, _ = await probe.request("GET", "/healthz")
                except (OSError, asyncio.IncompleteReadError, TimeoutError):
                    status = 0
                if status == 200:
                    return
                await asyncio.sleep(0.05)
            raise RuntimeError("the web host did not come up")
        finally:
            await probe.close()

    async def _play_under_faults(
        self, game: Game, pool: WorkerPool, client: Client, round_id: str, arena: tuple[Any, Any, list[str]]
    ) -> bool:
        """The players and the faults together, then the drain; whether the queue drained."""
        keyboard, secret, joined = arena
        for _ in range(self.config.workers):
            pool.spawn()
        pool.supervisor = asyncio.create_task(pool.supervise())
        stop = asyncio.Event()
        injector = asyncio.create_task(self._inject(pool, client, stop))
        moves = asyncio.create_task(self._reshard(stop))
        share, extra = divmod(self.config.guesses, self.config.players)
        http_players = round(self.config.http_share * len(joined))
        plans = [
            Plan(
                keyboard,
                secret,
                share + (n < extra),
                random.Random(self.rng.random()),
                http=n < http_players,
                solves=n % 3 == 2,  # a third of the in-process players solve with their last guess
            )
            for n in range(len(joined))
        ]
        try:
            await asyncio.gather(
                *(
                    self._play(game, round_id, player, plan)
                    for player, plan in zip(joined, plans, strict=True)
                )
            )
        finally:
            stop.set()
            await injector
            await moves  # the slot is back on the master it started on
        await pool.replace_all(armed=False)  # the drain: workers with no fault points armed
        return await self._drained(client)

    async def _reshard(self, stop: asyncio.Event) -> None:
        if self.nodes is not None:
            await cluster_schedule.reshard_until(self.nodes, self.config.tag, stop, self.history)

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
        violations += invariants.leaderboard(state)
        violations += self.history.problems
        if self.history.problems and self.host_log is not None:
            violations.append(f"the web host's output is in {self.host_log}")
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
