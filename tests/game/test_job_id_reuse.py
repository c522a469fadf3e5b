"""A job id the bus has forgotten (its done tombstone or dead row expired) but the game has not (its GES
record, its charge and refund marker) is refused as already used, charging nothing: never charged again
for a guess scored, never charged twice for a refunded one.

Real Redis; the bus's retention is shortened so the tombstones expire within the test.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from codemojex import guesses, players, refunds, rounds, wallet
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome, Refusal
from codemojex.keys import guess_of
from codemojex.refunds import Refund
from codemojex.score_worker import ScoreWorker
from echomq import Bus, Settings, Worker
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import eventually, running

COIN_GAME = GameSettings(
    grant=(("coin", 100),), allowance=(), solve_reward=(), prices=(("coin", 5),), max_attempts=1
)
SHORT = Settings(result_ttl_ms=1, dedup_window_ms=1, dead_ttl_ms=1)
GUESS = ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑")


@pytest.fixture
async def setup(redis_server, tag):
    """A coin game (5 of 100 a guess, one try a job) on a bus that forgets finished ids at once."""
    game = Game(Bus.from_url(redis_server.url, tag=tag, settings=SHORT), COIN_GAME)
    the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
    player = await players.register(game, "Ada")
    yield game, the_round, player
    await game.aclose()


def ledger(sync_redis, game, player_id):
    return [json.loads(raw) for raw in sync_redis.lrange(game.keys.ledger(player_id), 0, -1)]


async def forgotten(game, sync_redis, job) -> None:
    """Sweep until the bus has no row (nor tombstone) for ``job``."""

    async def gone() -> bool:
        await game.bus.sweep()
        return not sync_redis.exists(game.bus.keys.job(job))

    for _ in range(100):
        if await gone():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the bus kept {job}")


async def test_a_scored_guess_id_resubmitted_after_its_tombstone_expired_is_not_charged(setup, sync_redis):
    """A scored guess's job id, resubmitted once the bus forgot it, is refused as used: no second charge."""
    game, the_round, player = setup
    first = await guesses.submit(game, the_round.id, player.id, text(GUESS))
    assert first.outcome is Outcome.ADMITTED
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(lambda: sync_redis.exists(game.keys.guess(guess_of(first.job))), what="the score")
    await forgotten(game, sync_redis, first.job)
    before = ledger(sync_redis, game, player.id)
    again = await guesses.submit(game, the_round.id, player.id, text(GUESS), job_id=first.job)
    assert again.outcome is Outcome.REFUSED
    assert again.refusal is Refusal.IDEMPOTENCY_CONFLICT
    assert "already used" in again.detail
    assert ledger(sync_redis, game, player.id) == before
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 95}
    assert not sync_redis.exists(game.bus.keys.job(first.job))  # not admitted anew


async def test_a_refunded_dead_guess_id_resubmitted_after_its_row_expired_is_not_charged(setup, sync_redis):
    """A dead, refunded guess's job id, resubmitted once the bus forgot it, is refused: not charged twice."""
    game, the_round, player = setup
    first = await guesses.submit(game, the_round.id, player.id, text(GUESS))
    assert first.outcome is Outcome.ADMITTED
    [claim] = await game.bus.claim(1, lease_ms=100)  # a claimant that dies on the only try
    assert claim.job == first.job
    await asyncio.sleep(0.2)
    assert (await game.bus.sweep()).dead == 1
    assert (await refunds.refund(game, [first.job]))[0].outcome is Refund.REFUNDED
    await forgotten(game, sync_redis, first.job)
    before = ledger(sync_redis, game, player.id)
    again = await guesses.submit(game, the_round.id, player.id, text(GUESS), job_id=first.job)
    assert again.outcome is Outcome.REFUSED
    assert again.refusal is Refusal.IDEMPOTENCY_CONFLICT
    assert ledger(sync_redis, game, player.id) == before
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 100}
    assert not sync_redis.exists(game.bus.keys.job(first.job))
