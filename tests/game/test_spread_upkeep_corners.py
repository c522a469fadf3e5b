"""The corners of a spread game's rounds between its partitions (:mod:`codemojex.spread_upkeep`,
:mod:`codemojex.spread`): an opening or a copy cut off after the home partition, a close that lands
while the copies are written, a retention that runs before the whole summary. Whatever dies where, a
round is in every partition or refused by it, never open in one after its close, concluded once into
one summary of the whole game, and purged only after that summary."""

from __future__ import annotations

import asyncio

import pytest

from codemojex import history, rounds, spread, spread_upkeep
from codemojex.guesses import Outcome, Refusal
from codemojex.spread import SpreadGame
from tests.support.game import KEYBOARD, SECRET, text


@pytest.fixture
async def spread_game(redis_server, tag):
    async with SpreadGame.from_url(redis_server.url, tag=tag, partitions=3) as game:
        yield game


async def _at_home_only(game: SpreadGame, *, duration_s: float | None = None) -> rounds.Round:
    """A round written at home alone: an opening (the schedule's or an operator's) that died there."""
    home = game.games[0]
    opened = await rounds.open_round(home, keyboard=KEYBOARD, secret=SECRET, duration_s=duration_s)
    for part in game.games[1:]:
        assert await part.redis.exists(part.keys.round(opened.id)) == 0
    return opened


async def _held_by(game: SpreadGame, round_id: str) -> list[bool]:
    return [bool(await part.redis.exists(part.keys.round(round_id))) for part in game.games]


async def test_every_live_round_left_at_home_is_copied_however_many_opened_since(spread_game):
    older = await _at_home_only(spread_game)
    newer = await _at_home_only(spread_game)  # the schedule's last round is no longer the older one
    assert await spread_upkeep.copy_live(spread_game) == 2 * (len(spread_game.games) - 1)
    for round_id in (older.id, newer.id):
        assert await _held_by(spread_game, round_id) == [True] * len(spread_game.games)
        found = [await rounds.get_round(part, round_id) for part in spread_game.games]
        assert {(r.opens_ms, r.closes_ms, r.keyboard.keys) for r in found} == {
            (found[0].opens_ms, found[0].closes_ms, found[0].keyboard.keys)
        }
    assert await spread_upkeep.copy_live(spread_game) == 0  # copied once: a second pass writes nothing


async def test_a_round_closed_early_at_home_is_copied_closed_at_the_homes_instant(spread_game):
    home = spread_game.games[0]
    opened = await _at_home_only(spread_game)
    closed_ms = await rounds.close_round(home, opened.id, reveal=False)
    assert await spread_upkeep.copy_round(spread_game, opened.id) == len(spread_game.games) - 1
    for part in spread_game.games[1:]:
        copy = await rounds.get_round(part, opened.id)
        assert copy.closed_ms == closed_ms
        assert copy.status_at(await rounds.server_ms(part)) is rounds.RoundStatus.CLOSED
    # a player of a copied partition cannot guess there after the home's close
    name = next(n for n in (f"Late {i}" for i in range(100)) if spread_game.partition_of_name(n) != 0)
    player = await spread.register(spread_game, name)
    refused = await spread.submit(spread_game, opened.id, player.id, text(SECRET))
    assert (refused.outcome, refused.refusal) == (Outcome.REFUSED, Refusal.ROUND_CLOSED)


async def test_an_early_close_before_the_copies_closes_home_shows_nothing_and_the_copy_closes(spread_game):
    opened = await _at_home_only(spread_game)
    closed_ms = await spread.close_round(spread_game, opened.id)  # not a 404: the home has the round
    assert closed_ms > 0
    for part in spread_game.games:  # a copy written next could take a winning guess: nothing shows
        assert await part.redis.get(part.keys.revealed(opened.id)) is None
    await spread_upkeep.copy_live(spread_game)
    for part in spread_game.games[1:]:
        assert (await rounds.get_round(part, opened.id)).closed_ms == closed_ms
    assert await spread.reveal_closed(spread_game) == [opened.id]  # closed everywhere now: shown
    for part in spread_game.games:
        assert await rounds.read_revealed(part, [opened.id]) == [tuple(SECRET)]


async def test_a_close_racing_the_copies_leaves_no_copy_open(spread_game):
    """Copies and closes at once, many times: once both are done, every partition holding the round
    holds it closed."""
    for _ in range(10):
        opened = await _at_home_only(spread_game)
        await asyncio.gather(
            spread_upkeep.copy_round(spread_game, opened.id),
            spread.close_round(spread_game, opened.id),
            return_exceptions=True,
        )
        await spread_upkeep.copy_live(spread_game)
        for part in spread_game.games:
            assert (await rounds.get_round(part, opened.id)).closed_ms is not None


async def test_a_round_that_never_reached_a_partition_is_still_concluded(spread_game):
    opened = await _at_home_only(spread_game, duration_s=1)
    await asyncio.sleep(1.1)  # closed by its time, at home alone
    written, whole = await spread_upkeep.conclude_round(spread_game, opened.id)
    assert written is True
    assert whole is not None
    assert whole.secret == SECRET
    assert await _held_by(spread_game, opened.id) == [True] * len(spread_game.games)
    assert await spread_upkeep.conclude_closed(spread_game) == []


async def test_no_part_is_purged_before_the_whole_summary_is_written(spread_game):
    opened = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    person = await spread.register(spread_game, "Purge Early")
    assert (await spread.submit(spread_game, opened.id, person.id, text(SECRET))).outcome is Outcome.ADMITTED
    await spread.close_round(spread_game, opened.id)
    home = spread_game.games[0]
    await history.conclude_round(home, opened.id)  # the home's part only, then the worker died
    assert await spread_upkeep.purge(spread_game, retention_s=0) == []
    assert await home.redis.exists(home.keys.round(opened.id)) == 1  # the merge can still read it


async def test_a_mend_writes_the_home_first_and_closes_what_it_writes_after_a_close(spread_game):
    home = spread_game.games[0]
    first = await spread.open_round(spread_game, keyboard=KEYBOARD, secret=SECRET)
    assert await _held_by(spread_game, first.id) == [True] * len(spread_game.games)
    cut = await _at_home_only(spread_game)  # an opening cut off after the home
    await rounds.close_round(home, cut.id, reveal=False)  # and closed there meanwhile
    mended = await spread.open_round(
        spread_game, keyboard=KEYBOARD, secret=SECRET, round_id=cut.id, opens_at_ms=cut.opens_ms
    )
    assert mended.id == cut.id
    for part in spread_game.games:
        assert (await rounds.get_round(part, cut.id)).closed_ms is not None
