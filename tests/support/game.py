"""The game fixtures (a pytest plugin of tests/conftest.py): a Game on the session's real redis-server
under the test's own tag, a round with a known secret, a player, and a probe over both the bus's and the
game's keys."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from codemojex import players, ranking, rounds
from codemojex.game import Game, GameSettings
from codemojex.keys import GameKeys
from codemojex.rounds import Round
from echomq import Bus, Job
from echomq.keyspace import Keyspace
from tests.support.probe import Probe

KEYBOARD = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥")
SECRET = ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")


@pytest.fixture
async def game(redis_server, tag) -> AsyncIterator[Game]:
    """A Game (and its bus) on the session server under this test's own tag."""
    the_game = Game(Bus.from_url(redis_server.url, tag=tag), GameSettings())
    yield the_game
    await the_game.aclose()


@pytest.fixture
async def the_round(game) -> Round:
    """An open round with the fruit keyboard and a known secret (🍎🍌🍇🍎🍒🥝)."""
    return await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))


@pytest.fixture
async def player(game) -> players.Player:
    return await players.register(game, "Ada")


def text(keys: Sequence[str]) -> str:
    return "".join(keys)


def legacy_member(s: ranking.Standing) -> str:
    """A board member as the rule before solve time ranked first wrote it: attempts before the time, no
    ``@`` (what a board of a round scored before that upgrade holds)."""
    return (
        f"{0 if s.solved else 1}{6 - s.best_hits}{6 - s.best_nears}"
        f"{min(s.attempts, ranking.ATTEMPTS_CAP):06d}{s.best_at_ms:013d}:{s.player}"
    )


async def claim_job(bus: Bus, lease_ms: int = 30_000) -> Job:
    """Claim the next job as a worker would, and wrap it for a handler."""
    claims = await bus.claim(1, lease_ms=lease_ms)
    assert len(claims) == 1, "nothing to claim"
    return Job(claims[0])


@dataclass
class GameProbe:
    """A blocking view of the bus's and the game's keys, for assertions."""

    client: redis.Redis
    bus: Probe
    keys: GameKeys

    @classmethod
    def of(cls, client: redis.Redis, game: Game) -> GameProbe:
        return cls(client, Probe(client, Keyspace(game.bus.tag)), game.keys)

    def snapshot(self) -> dict[str, Any]:
        """Every key of the bus and of the game with its type and full value."""
        out = dict(self.bus.snapshot())
        out.update(Probe(self.client, self.keys).snapshot())  # type: ignore[arg-type]
        return out

    def records(self, round_id: str) -> list[str]:
        """The GES ids scored in the round, in admission (id) order, whatever order they were scored in."""
        return [m.decode() for m in self.client.zrange(self.keys.scored(round_id), 0, -1)]

    def played(self, round_id: str, player_id: str) -> list[str]:
        """The player's GES ids scored in the round, in admission order: the order their standing folds."""
        return [m.decode() for m in self.client.zrange(self.keys.played(round_id, player_id), 0, -1)]

    def record(self, guess_id: str) -> dict[str, str]:
        raw = self.client.hgetall(self.keys.guess(guess_id))
        return {k.decode(): v.decode() for k, v in raw.items()}

    def standing(self, round_id: str, player_id: str) -> ranking.Standing | None:
        """The player's standing as score.lua stored it (its board member, parsed)."""
        raw = self.client.hget(self.keys.standing(round_id), player_id)
        return None if raw is None else ranking.parse_board_member(raw.decode())

    def ledger_jobs(self, player_id: str) -> list[str]:
        """The JOB ids of the player's guess debits, in ledger order."""
        entries = [json.loads(raw) for raw in self.client.lrange(self.keys.ledger(player_id), 0, -1)]
        return [entry["job"] for entry in entries if entry["reason"] == "guess"]

    def events(self, round_id: str) -> list[dict[str, str]]:
        return [
            {k.decode(): v.decode() for k, v in fields.items()}
            for _, fields in self.client.xrange(self.keys.events(round_id))
        ]


@pytest.fixture
def game_probe(sync_redis, game) -> GameProbe:
    return GameProbe.of(sync_redis, game)
