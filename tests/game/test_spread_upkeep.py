"""The upkeep of a spread game (:mod:`codemojex.spread_upkeep`): the schedule opens each slot's round
once, in every partition at the same instants; a round is concluded into one summary of the whole game,
written once however many workers run the pass and wherever one died; each partition's per-guess data
is purged past the retention."""

from __future__ import annotations

import asyncio
import random

import pytest

from codemojex import history, rounds, schedule, spread, spread_upkeep
from codemojex.guesses import Outcome
from codemojex.spread import SpreadGame
from codemojex.spread_jobs import SpreadScoreWorker
from echomq import Worker
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import eventually, running

SETTINGS = schedule.RoundSettings(on=True, duration_s=60, gap_s=0)


@pytest.fixture
async def spread_game(redis_server, tag):
    async with SpreadGame.from_url(redis_server.url, tag=tag, partitions=3) as game:
        yield game


async def _copies(game: SpreadGame, round_id: str) -> list[tuple[object, ...]]:
    """What each partition holds of the round: its keyboard, instants, prices and secret."""
    found = []
    for part in game.games:
        the_round = await rounds.get_round(part, round_id)
        found.append(
            (the_round.keyboard.keys, the_round.opens_ms, the_round.closes_ms, the_round.prices,
             tuple(await rounds.read_secret(part, round_id)))
        )  # fmt: skip
    return found


async def test_the_schedule_opens_one_round_per_slot_in_every_partition(spread_game):
    opened = await spread_upkeep.schedule_step(spread_game, SETTINGS)
    assert opened is not None
    copies = await _copies(spread_game, opened)
    assert len(set(copies)) == 1  # the same round everywhere
    assert await spread_upkeep.schedule_step(spread_game, SETTINGS) is None  # still running: none
    racing = await asyncio.gather(*(spread_upkeep.schedule_step(spread_game, SETTINGS) for _ in range(4)))
    assert racing == [None] * 4
    for part in spread_game.games:
        assert [r.id for r in await rounds.list_rounds(part, 10)] == [opened]


async def test_a_round_the_schedule_opened_at_home_alone_is_copied_by_the_next_pass(spread_game):
    """A worker that died after schedule_round.lua, before the copies: the next pass writes them."""
    home = spread_game.games[0]
    opened = await schedule.step(home, SETTINGS)  # the home partition only, then the "crash"
    assert opened is not None
    for part in spread_game.games[1:]:
        assert await part.redis.exists(part.keys.round(opened)) == 0
    assert await spread_upkeep.schedule_step(spread_game, SETTINGS) is None  # no second round
    assert len(set(await _copies(spread_game, opened))) == 1


async def _play_and_score(game: SpreadGame, round_id: str, players: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    admitted = []
    for i in range(players):
        person = await spread.register(game, f"Upkeep {seed} {i}")
        for n in range(rng.randint(1, 3)):
            guess = SECRET if n == 1 and rng.random() < 0.5 else tuple(rng.choice(KEYBOARD) for _ in SECRET)
            done = await spread.submit(game, round_id, person.id, text(guess))
            if done.outcome is Outcome.ADMITTED:
                admitted.append(done.job)
    worker = Worker(game.pbus, SpreadScoreWorker(game).handle, concurrency=4, sweep_every_s=0.5)
    async with running(worker):
        await eventually(lambda: worker.processed >= len(admitted), timeout=60, what="every guess scored")
    return admitted


async def test_a_round_is_concluded_into_one_summary_of_the_whole_game_once(spread_game):
    the_round = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    admitted = await _play_and_score(spread_game, the_round.id, players=14, seed=3)
    assert await spread_upkeep.conclude_closed(spread_game) == []  # open: nothing concluded
    await spread.close_round(spread_game, the_round.id)
    runs = await asyncio.gather(*(spread_upkeep.conclude_round(spread_game, the_round.id) for _ in range(3)))
    assert sum(written for written, _ in runs) == 1  # three workers at once: written once
    whole = runs[0][1]
    assert whole is not None
    assert all(summary == whole for _, summary in runs)
    board = await spread.read_board(spread_game, the_round.id, history.WINNERS)
    assert [w.standing for w in whole.board] == [e.standing for e in board]
    assert [w.rank for w in whole.board] == list(range(1, len(board) + 1))
    assert len({spread_game.partition_of_player(w.standing.player) for w in whole.board}) > 1
    assert whole.guesses == len(admitted)
    assert whole.players == 14
    assert whole.secret == SECRET
    home = spread_game.games[0]
    assert await history.read_summary(home, the_round.id, whole=True) == whole
    assert [s.round_id for s in await history.list_history(home, whole=True)] == [the_round.id]
    entries = await home.redis.xrange(home.keys.events(the_round.id))
    assert [fields[b"kind"] for _, fields in entries].count(b"concluded") == 1
    assert await spread_upkeep.conclude_closed(spread_game) == []  # nothing left to conclude


async def test_a_conclusion_cut_off_between_the_parts_and_the_whole_is_finished_by_the_next_pass(spread_game):
    the_round = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    await _play_and_score(spread_game, the_round.id, players=8, seed=4)
    await spread.close_round(spread_game, the_round.id)
    for part in spread_game.games:  # every part concluded, then the worker died
        assert (await history.conclude_round(part, the_round.id))[1] is not None
    assert await history.read_summary(spread_game.games[0], the_round.id, whole=True) is None
    assert await spread_upkeep.conclude_closed(spread_game) == [the_round.id]
    whole = await history.read_summary(spread_game.games[0], the_round.id, whole=True)
    assert whole is not None
    assert whole.board == tuple(
        history.Winner(e.rank, e.standing, e.name)
        for e in await spread.read_board(spread_game, the_round.id, history.WINNERS)
    )


async def test_no_partition_concludes_or_reveals_while_another_still_takes_guesses(spread_game):
    the_round = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    await rounds.close_round(spread_game.games[0], the_round.id, reveal=False)  # the first partition alone
    assert await spread_upkeep.conclude_round(spread_game, the_round.id) == (False, None)
    for part in spread_game.games:
        assert await part.redis.hget(part.keys.summaries, the_round.id) is None
        assert await part.redis.get(part.keys.revealed(the_round.id)) is None


async def test_the_retention_purges_every_partitions_per_guess_data(spread_game):
    the_round = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    await _play_and_score(spread_game, the_round.id, players=8, seed=5)
    await spread.close_round(spread_game, the_round.id)
    await spread_upkeep.conclude_round(spread_game, the_round.id)
    had = [await part.redis.exists(part.keys.board(the_round.id)) for part in spread_game.games]
    assert sum(had) > 1  # the test can fail: boards in more than one partition
    assert await spread_upkeep.purge(spread_game, retention_s=0) == [the_round.id]
    for part in spread_game.games:
        assert await part.redis.exists(part.keys.board(the_round.id)) == 0
        assert await part.redis.zscore(part.keys.retained, the_round.id) is None
    home = spread_game.games[0]
    assert await history.read_summary(home, the_round.id, whole=True) is not None  # kept for good
