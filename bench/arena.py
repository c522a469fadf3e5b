"""The game benchmark's set-up (:mod:`bench.game`): one open round and its paying players on a bus tag
of its own, and the game's script calls built by the game's own builders, to time without building."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from redis.asyncio import Redis as AsyncRedis

from codemojex import players as game_players
from codemojex import rounds, score_worker, wallet
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.guesses import submit_call as guesses_submit_call
from codemojex.keys import JOB, GameKeys
from codemojex.payload import GuessJob
from echomq import Bus, Claim, ids
from echomq.keyspace import Keyspace

# Every player's guesses of a phase wait in their lane before the workers start: lift the per-player cap.
SETTINGS = GameSettings(max_queued=1_000_000)


# --- set-up: one round and its players on a bus tag of its own --------------------------------------


@dataclass
class Arena:
    """One open round on bus ``tag`` with ``players`` who can pay for every guess the bench makes."""

    url: str
    tag: str
    round_id: str
    keyboard: tuple[str, ...]
    secret: tuple[str, ...]
    length: int
    players: list[str]
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    @property
    def keys(self) -> GameKeys:
        return GameKeys(self.tag)

    @cached_property
    def game(self) -> Game:
        return _offline_game(self)

    @property
    def bus_keys(self) -> Keyspace:
        return Keyspace(self.tag)

    def guesses(self, count: int) -> list[tuple[str, str, tuple[str, ...]]]:
        """``count`` (job, player, guess): players in turn, random keys, never the secret (a solved player
        is refused any further guess, which would leave the bench waiting for a score that never comes)."""
        made = []
        for i in range(count):
            guess = self.secret
            while guess == self.secret:
                guess = tuple(self.rng.choice(self.keyboard) for _ in range(self.length))
            made.append((ids.mint(JOB), self.players[i % len(self.players)], guess))
        return made


async def _arena(url: str, tag: str, players: int, guesses: int) -> Arena:
    game = Game.from_url(url, tag=tag, settings=SETTINGS)
    async with game:
        the_round = await rounds.open_round(game)
        secret = await rounds.read_secret(game, the_round.id)
        registered = await asyncio.gather(
            *(game_players.register(game, f"bench {i}") for i in range(players))
        )
        each = math.ceil(guesses / players) + 1  # the round's allowance (first guess) covers a few more
        currency, _ = the_round.prices[0]
        await asyncio.gather(*(wallet.credit(game, p.id, currency, each, reason="bench") for p in registered))
    return Arena(
        url,
        tag,
        the_round.id,
        the_round.keyboard.keys,
        secret,
        the_round.length,
        [p.id for p in registered],
    )


def arena(url: str, tag: str, players: int, guesses: int) -> Arena:
    return asyncio.run(_arena(url, tag, players, guesses))


# --- the calls, built by the game's own builders (guesses.submit_call, score_worker.score_call) ------


def _offline_game(a: Arena) -> Game:
    """A Game whose client never connects: only its keys and settings are used, to build calls."""
    return Game(Bus(AsyncRedis(), tag=a.tag), SETTINGS)


def submit_call(a: Arena, job: str, player: str, guess: Sequence[str]) -> tuple[list[str], list[Any]]:
    """Keys and args of one submit.lua call, as codemojex.guesses.submit sends it (no locks)."""
    return guesses_submit_call(a.game, job, a.round_id, player, guess)


def score_call(a: Arena, job: str, player: str, guess: Sequence[str]) -> tuple[list[str], list[Any]]:
    """Keys and args of one score.lua call, as codemojex.score_worker.handle sends it; args[1] and
    args[2], the claim's attempts token and request id, are filled in from the claim."""
    request = GuessJob(a.round_id, player, tuple(guess))
    return score_worker.score_call(a.game, Claim(job, player, token=1), request, score(a.secret, guess))
