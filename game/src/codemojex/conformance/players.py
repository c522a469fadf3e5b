"""The run's simulated players: they join the round (registered, credited, each with an API token), then
each plays its :class:`Plan`, in process through :func:`codemojex.guesses.submit` or over HTTP to a web
host process (:meth:`Players.web_host`) with an ``Idempotency-Key``.

A submit that got no answer is retried with the same JOB id (or key) until it gets one, as an idempotent
client does, and a share of the answered guesses is submitted again on purpose (duplicates). What they
were answered goes into the run's :class:`~.history.History`.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from codemojex import players as game_players
from codemojex import rounds, wallet
from codemojex.conformance.history import History
from codemojex.conformance.http import HttpPlayer
from codemojex.conformance.pool import reap
from codemojex.conformance.schedule import SETTINGS, Config, with_socket_timeout
from codemojex.errors import CodemojexError
from codemojex.game import Game
from codemojex.guesses import Outcome, submit
from codemojex.keys import JOB
from echomq import ids
from echomq.testing.server import free_port


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


@dataclass
class Players:
    """The run's players, what they know (their API tokens, the web host's port) and how they play."""

    config: Config
    history: History
    tokens: dict[str, str] = field(default_factory=dict)  # player -> API token
    host_port: int = 0  # the web host process's, when some players play over HTTP
    host_log: Path | None = None  # its output (kept when a player saw it break a promise)

    async def join(self, game: Game) -> tuple[str, tuple[str, ...], tuple[str, ...], list[str]]:
        """Open the round and register and credit the players: its id, keyboard and secret, and who joined."""
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

    def plans(
        self, rng: random.Random, keyboard: tuple[str, ...], secret: tuple[str, ...], joined: list[str]
    ) -> list[Plan]:
        """Each joined player's part: an even share of the guesses, the first ones over HTTP."""
        share, extra = divmod(self.config.guesses, self.config.players)
        http_players = round(self.config.http_share * len(joined))
        return [
            Plan(
                keyboard,
                secret,
                share + (n < extra),
                random.Random(rng.random()),
                http=n < http_players,
                solves=n % 3 == 2,  # a third of the in-process players solve with their last guess
            )
            for n in range(len(joined))
        ]

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

    async def play(self, game: Game, round_id: str, player: str, plan: Plan) -> None:
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

    @contextlib.contextmanager
    def web_host(self, redis_url: str) -> Iterator[None]:
        """The web host in a process of its own, on Redis directly (the proxy is the workers' link)."""
        self.host_port = free_port()
        url = with_socket_timeout(redis_url, self.config.socket_timeout_s)
        argv = [sys.executable, "-m", "codemojex.web", "--redis-url", url, "--tag", self.config.tag]
        argv += ["--cluster"] if self.config.cluster else []
        argv += ["--port", str(self.host_port), "--max-queued", str(SETTINGS.max_queued)]
        argv += ["--max-attempts", str(self.config.max_attempts)]
        argv += ["--wait-replicas", str(self.config.wait_replicas)]  # durable under failover
        argv += ["--unlimited"]  # every player comes from one address here: the limits are not under test
        self.host_log = Path(tempfile.mkdtemp(prefix="conformance-")) / "host.log"
        with self.host_log.open("wb") as log:
            host = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            try:
                yield
            finally:
                host.terminate()
                reap(host)

    async def host_ready(self) -> None:
        """Wait until the web host answers its health check."""
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
