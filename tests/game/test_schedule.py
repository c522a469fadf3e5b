"""The round schedule (:mod:`codemojex.schedule`): when its round closes, by its clock or by a call, the
next opens after the gap, with the duration; two workers open one round a slot; a lost reply's retry
opens no second round; off, it opens nothing."""

from __future__ import annotations

import asyncio

import pytest

from codemojex import rounds, schedule
from codemojex.errors import InvalidOption, Unavailable
from codemojex.game import Game
from codemojex.schedule import RoundSettings
from echomq import Bus
from tests.support.workers import eventually

FAST = RoundSettings(on=True, duration_s=1.0, gap_s=0.0)
LONG = RoundSettings(on=True, duration_s=600, gap_s=0)


async def _open_ids(game: Game) -> list[str]:
    return [r.id for r in await rounds.list_rounds(game, 100)]


async def test_the_settings_round_trip_and_are_off_by_default(game):
    """No settings kept: the schedule is off (serve writes them); kept ones are read back as written."""
    assert await schedule.read_settings(game) == RoundSettings()
    assert await schedule.step(game) is None
    assert await _open_ids(game) == []
    kept = RoundSettings(on=True, duration_s=90, gap_s=5, retention_s=60)
    await schedule.write_settings(game, kept)
    assert await schedule.read_settings(game) == kept


@pytest.mark.parametrize(
    "bad", [{"duration_s": 0}, {"gap_s": -1}, {"retention_s": True}, {"duration_s": "9"}]
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(InvalidOption):
        RoundSettings(on=True, **bad)


async def test_the_next_round_opens_when_the_round_closes_on_its_clock(game):
    """A round of the schedule closes by its close time (server clock), and the next one opens then."""
    await schedule.write_settings(game, FAST)
    first = await schedule.step(game)
    assert first is not None
    assert await schedule.step(game) is None, "the round is running: nothing to open"
    opened = await rounds.get_round(game, first)
    assert opened.closes_ms == opened.opens_ms + 1000
    await eventually(lambda: schedule.step(game), what="the next round")
    second = await schedule.scheduled_round(game)
    assert second != first
    now = await rounds.server_ms(game)
    assert (await rounds.get_round(game, first)).status_at(now) is rounds.RoundStatus.CLOSED
    assert (await rounds.get_round(game, second)).status_at(now) is rounds.RoundStatus.OPEN


async def test_an_operator_close_starts_the_gap_and_the_next_round_opens_after_it(game):
    """Closed by a call: the next round is opened at once, to open the gap after that close."""
    await schedule.write_settings(game, RoundSettings(on=True, duration_s=600, gap_s=30))
    first = await schedule.step(game)
    assert first is not None
    closed_ms = await rounds.close_round(game, first)
    second = await schedule.step(game)
    assert second is not None
    upcoming = await rounds.get_round(game, second)
    assert upcoming.opens_ms == closed_ms + 30_000
    assert upcoming.status_at(await rounds.server_ms(game)) is rounds.RoundStatus.SCHEDULED
    assert upcoming.closes_ms == upcoming.opens_ms + 600_000
    assert await schedule.step(game) is None, "the next round is scheduled: not a third"


async def test_two_workers_open_one_round_a_slot(redis_server, tag, game):
    """Two workers that read the same state race: one round opens, the other changes nothing."""
    await schedule.write_settings(game, LONG)
    other = Game(Bus.from_url(redis_server.url, tag=tag))
    try:
        for slot in range(3):
            last = await schedule.scheduled_round(game)
            # Both read the same state, then both ask for the next slot with ids of their own.
            results = await asyncio.gather(
                schedule.open_slot(game, slot, last, LONG), schedule.open_slot(other, slot, last, LONG)
            )
            assert sum(r is not None for r in results) == 1
            assert len(await _open_ids(game)) == slot + 1
            # And their next passes, side by side, open nothing while that round runs.
            assert await asyncio.gather(schedule.step(game), schedule.step(other)) == [None, None]
            opened = next(r for r in results if r is not None)
            await rounds.close_round(game, opened)
    finally:
        await other.aclose()


async def test_a_lost_reply_is_retried_and_opens_one_round(game, monkeypatch):
    """The script ran but its reply was lost: step's retry answers the round the first run opened."""
    await schedule.write_settings(game, FAST)
    real = game.run
    lost: list[str] = []

    async def lossy(name, keys, args):
        reply = await real(name, keys, args)
        if name == "schedule_round" and not lost:
            lost.append(args[1])
            raise Unavailable("the reply was lost")
        return reply

    monkeypatch.setattr(game, "run", lossy)
    opened = await schedule.step(game)
    assert opened == lost[0]
    assert await _open_ids(game) == [opened]
    assert await schedule.scheduled_round(game) == opened
    # A retry with the same slot and id later still answers that round, and opens nothing more.
    assert await schedule.open_slot(game, 0, None, FAST, round_id=opened) == opened
    assert await schedule.open_slot(game, 0, None, FAST) is None
    assert await _open_ids(game) == [opened]


async def test_turned_off_it_opens_nothing(game):
    await schedule.write_settings(game, RoundSettings(on=True, duration_s=600))
    first = await schedule.step(game)
    await rounds.close_round(game, first)
    await schedule.write_settings(game, RoundSettings(on=False))
    assert await schedule.step(game) is None
    assert await _open_ids(game) == [first]


async def test_a_round_that_cannot_be_concluded_stops_neither_the_schedule_nor_the_other_rounds(
    game, sync_redis
):
    """One round whose conclusion fails (here: its stored keyboard is unreadable) is logged and left;
    the upkeep pass still concludes the other closed rounds and the schedule still opens its next."""
    from codemojex.upkeep import Upkeep  # noqa: PLC0415  (the pass under test)

    broken = await rounds.open_round(game, duration_s=1)
    fine = await rounds.open_round(game, duration_s=1)
    sync_redis.hset(game.keys.round(broken.id), "keyboard", "not json")
    await schedule.write_settings(game, FAST)
    upkeep = Upkeep(game, every_s=0.1)

    async def concluded_and_scheduled() -> bool:
        await upkeep.run_pass()
        summaries = sync_redis.hkeys(game.keys.summaries)
        return fine.id.encode() in summaries and await schedule.scheduled_round(game) is not None

    await eventually(concluded_and_scheduled, what="the fine round concluded and a scheduled round")
