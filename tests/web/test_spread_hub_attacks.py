"""The events hub of a spread host (:class:`codemojex.web.hub.Hub` over a :class:`SpreadGame`), on a real
redis-server: a partition's reader must not be lost when the round's last stream ends and a new one
comes while the home partition's read is still blocked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from codemojex import rounds, spread
from codemojex.game import Game
from codemojex.spread import SpreadGame
from codemojex.web import hub as hub_module
from codemojex.web.admission import Limits
from codemojex.web.hub import Hub
from codemojex.web.subscribers import Subscriber
from tests.support.workers import eventually

P = 3
PLAYER = "PLR" + "1" * 23


@pytest.fixture
async def spread_hub(redis_server, tag) -> AsyncIterator[tuple[SpreadGame, Hub]]:
    game = SpreadGame.from_url(redis_server.url, tag, P)
    readers = [Game.from_url(redis_server.url, g.bus.tag, max_connections=1) for g in game.games]
    hub = Hub(game.games[0], limits=Limits(stream_check_s=5.0), spread=game, readers=readers)
    try:
        yield game, hub
    finally:
        await hub.close()
        await game.aclose()


async def _scored(game: Game, round_id: str, player: str, guess: str) -> None:
    await game.redis.xadd(
        game.keys.events(round_id),
        {"kind": "scored", "player": player, "job": "JOB" + guess[3:], "guess": guess, "code": "HHHHHH",
         "solved": "false", "newly": "0", "attempts": "1"},
    )  # fmt: skip


async def test_a_partitions_reader_outlives_a_moment_with_no_stream(spread_hub):
    """The round's only stream ends; a (foreign) entry wakes partition 1's blocked read while the home
    partition's read is still blocked; a new stream comes. Partition 1's scored guesses must reach it."""
    game, hub = spread_hub
    round_id = (await spread.open_round(game, size=8, duration_s=60)).id
    first = await hub.subscribe(round_id, PLAYER)
    await asyncio.sleep(0.2)  # every partition's read is blocked now
    hub.unsubscribe(first)
    await game.games[1].redis.xadd(game.games[1].keys.events(round_id), {"kind": "noise"})
    await asyncio.sleep(0.2)  # partition 1's read woke with nobody watching (the home's still blocks)
    second = await hub.subscribe(round_id, PLAYER)
    await _scored(game.games[1], round_id, PLAYER, "GES" + "2" * 23)
    assert "GES" + "2" * 23 in await _scored_guesses(second, 3.0)


async def _scored_guesses(subscriber: Subscriber, within_s: float) -> list[str]:
    """The guess ids of the ``scored`` events the subscriber got within ``within_s``."""
    found: list[str] = []
    try:
        async with asyncio.timeout(within_s):
            while (item := await subscriber.queue.get()) is not None:
                if item[0] == "scored":
                    found.append(item[1]["guess_id"])
                    return found
    except TimeoutError:
        pass
    return found


async def test_a_round_closed_at_home_alone_keeps_its_streams_until_every_partition_is_closed(
    redis_server, tag, monkeypatch
):
    """An early close cut off after the home partition: the round still takes guesses elsewhere, so
    its watchers' streams are not ended as closed; once every partition is closed they are."""
    monkeypatch.setattr(hub_module, "CLOSE_WAIT_MS", 0)  # no conclusion is coming: end at once
    game = SpreadGame.from_url(redis_server.url, tag, P)
    readers = [Game.from_url(redis_server.url, g.bus.tag, max_connections=1) for g in game.games]
    hub = Hub(game.games[0], limits=Limits(stream_check_s=0.1), spread=game, readers=readers)
    try:
        round_id = (await spread.open_round(game, size=8)).id
        watcher = await hub.subscribe(round_id, PLAYER)
        await rounds.close_round(game.games[0], round_id, reveal=False)  # the home alone, then cut off
        await asyncio.sleep(1.0)  # ten checks
        assert not watcher.ended
        for part in game.games[1:]:
            await rounds.close_round(part, round_id, reveal=False)
        await eventually(lambda: watcher.ended, timeout=10, what="the stream ended once closed everywhere")
    finally:
        await hub.close()
        await game.aclose()
