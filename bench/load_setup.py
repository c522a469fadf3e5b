"""The set-up of the player's path under load (:mod:`bench.load`): its web host and score-worker
processes, its players joined over HTTP and funded, its requests planned, the Redis calls counted."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import redis

from bench.processes import stop
from bench.traffic import guess_request
from codemojex import rounds, wallet
from codemojex.game import Game, GameSettings
from echomq.testing.server import free_port


def commands(client: redis.Redis) -> tuple[int, int]:
    """(EVALSHA calls, every command's calls, inside scripts too) so far."""
    stats = client.info("commandstats")
    evalsha = int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
    return evalsha, sum(int(v.get("calls", 0)) for v in stats.values())


@contextlib.contextmanager
def host(url: str, tag: str, hosts: int, logs: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    argv = [sys.executable, "-m", "codemojex.web", "--redis-url", url, "--tag", tag, "--port", str(port)]
    argv += ["--max-queued", "1000000", "--unlimited", "--hosts", str(hosts)]
    with (logs / "host.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the host did not start: {(logs / 'host.log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield port, proc
    finally:
        stop([proc])


def workers(url: str, tag: str, count: int, concurrency: int, logs: Path) -> list[subprocess.Popen[bytes]]:
    argv = [sys.executable, "-m", "codemojex.cli", "--redis-url", url, "--tag", tag]
    argv += ["--log-level", "WARNING", "worker", "--concurrency", str(concurrency)]
    with (logs / "workers.log").open("ab") as err:
        return [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err) for _ in range(count)]


async def join(port: int, count: int) -> list[tuple[str, str]]:
    """``count`` players joined over HTTP: their ids and tokens."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:

        async def one(i: int) -> tuple[str, str]:
            for _ in range(5):  # a connection the host closed meanwhile (keep-alive timeout): again
                try:
                    reply = (await client.post("/api/players", json={"name": f"load {i}"})).json()
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
                    continue
                return reply["player_id"], reply["token"]
            raise RuntimeError(f"player {i} could not join")

        tokens: list[tuple[str, str]] = []
        for start in range(0, count, 50):
            tokens += await asyncio.gather(*(one(i) for i in range(start, min(count, start + 50))))
        return tokens


async def fund(url: str, tag: str, round_id: str, players: list[str], each: int) -> None:
    """Credit each player ``each`` of the round's first currency."""
    game = Game.from_url(url, tag=tag, settings=GameSettings(max_queued=1_000_000))
    async with game:
        currency, _ = (await rounds.get_round(game, round_id)).prices[0]
        for player in players:
            await wallet.credit(game, player, currency, each, reason="bench")


def plan(a: Any, tokens: list[str], count: int, port: int) -> list[bytes]:
    return [
        guess_request(port, a.round_id, tokens[i % len(tokens)], guess)
        for i, (_, _, guess) in enumerate(a.guesses(count))
    ]
