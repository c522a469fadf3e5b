"""The worker processes ``codemojex serve`` starts and keeps running: the score worker
(:class:`WorkerSupervisor`: one ``codemojex worker`` process, restarted when it dies) and, with the proof
on, the proof's demonstration game (:class:`ProofRunner`: its own worker on the demo bus and a demo round
kept open, :mod:`codemojex.proof`).

A worker gets its Redis URL (with its user's password) in its environment, never on its command line
(``ps`` shows that to every user of the machine). Each runs in its own session, so a terminal's Ctrl-C
reaches serve alone, which stops the workers before Redis, and dies with serve (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from codemojex import access, faults, proof, proof_retention
from codemojex.errors import CodemojexError
from echomq import Settings
from echomq.testing.server import die_with_parent

WORKER_LEASE_MS = 5000  # short, so the proof page's crashed job returns within seconds (renewed meanwhile)
WORKER_SWEEP_S = 1.0
WORKER_GRACE_S = 5.0
RESTART_DELAY_S = 0.5  # before restarting a worker that died; doubled (to 10 s) while it dies young
RESTART_DELAY_MAX_S = 10.0
YOUNG_S = 5.0
PROOF_CONCURRENCY = 2  # the demo worker's job slots


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """What the proof page shows of the demo score worker process that ``codemojex serve`` supervises."""

    pid: int | None
    restarts: int
    alive: bool


def _say(text: str) -> None:
    print(text, flush=True)  # noqa: T201  (serve talks to the person who started it)


class WorkerSupervisor:
    """One ``codemojex worker`` process, restarted whenever it exits while the host runs; its Redis URL
    (with a password) is in its environment, never on its command line (``ps`` shows that to all)."""

    def __init__(
        self,
        url: str,
        *,
        tag: str,
        concurrency: int,
        fault_points: tuple[str, ...] = (),
        name: str = "score worker",
        bus: Settings | None = None,
        partitions: int = 1,
    ) -> None:
        self.name = name
        self.argv = [
            sys.executable, "-m", "codemojex.cli",
            "--tag", tag, "--log-level", "WARNING",
            "worker",
            "--concurrency", str(concurrency),
            "--lease-ms", str(WORKER_LEASE_MS),
            "--sweep-every", str(WORKER_SWEEP_S),
            "--grace", str(WORKER_GRACE_S),
            *(["--partitions", str(partitions)] if partitions > 1 else []),
        ]  # fmt: skip
        if bus is not None:  # the bus's retention, as the host's (the proof's demo bus: proof.DEMO_BUS)
            self.argv += [
                "--result-ttl-ms", str(bus.result_ttl_ms),
                "--dedup-window-ms", str(bus.dedup_window_ms),
                "--dead-ttl-ms", str(bus.dead_ttl_ms),
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
    ``--proof-crash``, and in no other worker), a demo round kept open (a new one of ``round_s`` when it
    ends) and, every ``check_s``, the demo rounds closed ``grace_s`` ago deleted with their players'
    excess (:func:`codemojex.proof_retention.purge`; this runs with the worker's Redis user, which may
    delete the rounds' secrets)."""

    ROUND_CHECK_S = 30.0

    def __init__(
        self,
        url: str,
        tag: str,
        *,
        crash: bool,
        round_s: float = proof.ROUND_S,
        grace_s: float = proof_retention.GRACE_S,
        check_s: float = ROUND_CHECK_S,
    ) -> None:
        self.url = url
        self.real_tag = tag
        self.tag = proof.demo_tag(tag)
        self.round_s, self.grace_s, self.check_s = round_s, grace_s, check_s
        armed = (faults.REQUESTED,) if crash else ()
        self.supervisor = WorkerSupervisor(
            url,
            tag=self.tag,
            concurrency=PROOF_CONCURRENCY,
            fault_points=armed,
            name="proof worker",
            bus=proof.DEMO_BUS,
        )
        self._rounds: asyncio.Task[None] | None = None

    def status(self) -> WorkerStatus:
        return self.supervisor.status()

    async def keep(self) -> proof_retention.Purge:
        """One check: a demo round open (:func:`codemojex.proof.ensure_round`), then the purge of the
        rounds past their grace (:func:`codemojex.proof_retention.purge`)."""
        async with proof.demo_game(self.url, self.real_tag, max_connections=4) as demo:
            await proof.ensure_round(demo, self.round_s)
            return await proof_retention.purge(demo, grace_s=self.grace_s)

    async def _keep_round(self) -> None:
        while True:
            await asyncio.sleep(self.check_s)
            try:
                done = await self.keep()
            except CodemojexError as exc:  # Redis away for now: the next check tries again
                _say(f"proof: could not check the demo round ({exc.code}): {exc}")
                continue
            if done.rounds:
                _say(f"proof: deleted {len(done.rounds)} old demo rounds, {done.retired} idle demo players")

    async def start(self) -> None:
        await self.keep()
        self.supervisor.start()
        self._rounds = asyncio.create_task(self._keep_round(), name="proof rounds")

    async def stop(self) -> None:
        if self._rounds is not None:
            self._rounds.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rounds
        await self.supervisor.stop()
