"""A closed round is concluded once (:mod:`codemojex.history`): its summary (secret, final top of the
board with names, counts, times) is kept, it is listed in the history, and one ``closed`` event with the
winners goes on its stream, whatever the number of workers or retries; an open round is not concluded."""

from __future__ import annotations

import asyncio

from codemojex import guesses, history, players, refunds, rounds, score_worker
from codemojex.game import Game
from codemojex.upkeep import Upkeep
from echomq import Bus, Finish, Worker
from tests.support.game import SECRET, claim_job, text
from tests.support.workers import eventually, running


async def _play(game, round_id, *plays):
    """Submit each (player, guess) and score them all with a real worker."""
    for player_id, guess in plays:
        await guesses.submit(game, round_id, player_id, guess)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.processed == len(plays), what="scored")


async def test_a_closed_round_is_concluded_once_with_its_winners(game, the_round, game_probe):
    ada = await players.register(game, "Ada")
    bob = await players.register(game, "Bob")
    await _play(game, the_round.id, (bob.id, "🍎🍌🍒🍇🍑🍍"), (ada.id, text(SECRET)))
    assert await history.conclude_round(game, the_round.id) == (False, None), "open: not concluded"
    closed_ms = await rounds.close_round(game, the_round.id)
    done, summary = await history.conclude_round(game, the_round.id)
    assert done
    assert summary is not None
    assert summary.secret == SECRET
    assert (summary.players, summary.guesses, summary.closed_ms) == (2, 2, closed_ms)
    assert [(w.rank, w.name, w.standing.solved) for w in summary.board] == [
        (1, "Ada", True),
        (2, "Bob", False),
    ]
    again = await history.conclude_round(game, the_round.id)
    assert again == (False, summary), "a retry answers the same summary and writes nothing"
    closed_events = [e for e in game_probe.events(the_round.id) if e["kind"] == "closed"]
    assert len(closed_events) == 1
    assert history.parse_summary(closed_events[0]["summary"]) == summary
    assert await history.read_summary(game, the_round.id) == summary
    assert [s.round_id for s in await history.list_history(game)] == [the_round.id]


async def test_two_workers_concluding_at_once_announce_once(redis_server, tag, game, the_round, game_probe):
    other = Game(Bus.from_url(redis_server.url, tag=tag))
    try:
        await rounds.close_round(game, the_round.id)
        results = await asyncio.gather(
            *(history.conclude_round(g, the_round.id) for g in (game, other, game, other))
        )
    finally:
        await other.aclose()
    assert [done for done, _ in results].count(True) == 1
    assert len({summary for _, summary in results}) == 1
    assert [e["kind"] for e in game_probe.events(the_round.id)].count("closed") == 1


async def test_a_round_closed_by_its_clock_is_concluded_by_the_upkeep_pass(game, game_probe):
    """No call closes it: the worker's pass marks it closed, reveals, summarises and announces."""
    short = await rounds.open_round(game, duration_s=1)
    upkeep = Upkeep(game, every_s=0.1)
    await upkeep.run_pass()
    assert await history.read_summary(game, short.id) is None
    await eventually(lambda: _concluded(upkeep, short.id), what="the conclusion")
    stored = await rounds.get_round(game, short.id)
    assert stored.closed_ms == stored.closes_ms
    assert await rounds.read_revealed(game, [short.id]) == [await rounds.read_secret(game, short.id)]
    for _ in range(3):
        await upkeep.run_pass()
    assert [e["kind"] for e in game_probe.events(short.id)] == ["closed"]


async def _concluded(upkeep, round_id):
    await upkeep.run_pass()
    return await history.read_summary(upkeep.game, round_id) is not None


async def test_queued_guesses_are_waited_for_before_the_board_is_final(game, the_round, player):
    """A guess admitted before the close, not scored yet: the conclusion waits for it (within a grace)."""
    await guesses.submit(game, the_round.id, player.id, text(SECRET))
    await rounds.close_round(game, the_round.id)
    assert await history.conclude_round(game, the_round.id) == (False, None)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.processed == 1, what="scored")
    done, summary = await history.conclude_round(game, the_round.id)
    assert done
    assert summary is not None
    assert summary.board[0].standing.solved
    assert summary.guesses == 1


async def test_history_lists_newest_close_first_and_pages(game):
    closed = []
    for _ in range(3):
        opened = await rounds.open_round(game)
        await rounds.close_round(game, opened.id)
        await history.conclude_round(game, opened.id)
        closed.append(opened.id)
    listed = await history.list_history(game)
    assert [s.round_id for s in listed] == closed[::-1]
    older = await history.list_history(game, limit=2, before_ms=listed[0].closed_ms)
    assert all(s.closed_ms < listed[0].closed_ms for s in older)


async def test_paging_by_the_last_round_seen_skips_no_round_that_closed_in_the_same_millisecond(
    game, sync_redis
):
    """Rounds whose closes tie to the millisecond: paging one at a time with the last page's close time
    and round id lists each exactly once (a close time alone would skip the ties)."""
    closed = []
    for _ in range(4):
        opened = await rounds.open_round(game)
        await rounds.close_round(game, opened.id)
        await history.conclude_round(game, opened.id)
        closed.append(opened.id)
    tie = (await history.list_history(game))[0].closed_ms
    sync_redis.zadd(game.keys.history, dict.fromkeys(closed[1:], tie))  # three close at once
    seen: list[str] = []
    cursor: tuple[int, str] | None = None
    while page := await history.list_history(
        game, limit=1, before_ms=cursor[0] if cursor else None, before_round=cursor[1] if cursor else None
    ):
        seen += [summary.round_id for summary in page]
        cursor = (int(sync_redis.zscore(game.keys.history, page[-1].round_id)), page[-1].round_id)
    assert len(seen) == len(closed), "no round twice"
    assert sorted(seen) == sorted(closed), "no round skipped"


async def test_a_recharged_guess_does_not_hide_a_queued_one_from_the_conclusion(game, the_round):
    """A dead guess refunded, retried and scored (recharged) is in the round's charges, its scored
    records and its refunds once each: it is settled once, so a solving guess still queued at the close
    is waited for and is on the final board."""
    ada = await players.register(game, "Ada")
    bob = await players.register(game, "Bob")
    await guesses.submit(game, the_round.id, ada.id, "🍎🍌🍒🍇🍑🍍")
    [claim] = await game.bus.claim(1, lease_ms=60_000)
    await game.bus.fail(claim, "dies", retryable=False)
    assert (await refunds.refund(game, [claim.job]))[0].outcome is refunds.Refund.REFUNDED
    assert await game.bus.retry_dead(claim.job)
    worker = score_worker.ScoreWorker(game)
    assert await worker.handle(await claim_job(game.bus)) is Finish.DONE  # recharged and scored
    await guesses.submit(game, the_round.id, bob.id, text(SECRET))  # queued at the close
    await rounds.close_round(game, the_round.id)
    assert await history.pending_guesses(game, the_round.id) == 1
    assert await history.conclude_round(game, the_round.id) == (False, None), "waits for Bob's guess"
    assert await worker.handle(await claim_job(game.bus)) is Finish.DONE
    done, summary = await history.conclude_round(game, the_round.id)
    assert done
    assert summary is not None
    assert [(w.name, w.standing.solved) for w in summary.board] == [("Bob", True), ("Ada", False)]


async def test_a_round_closed_after_many_newer_rounds_opened_is_still_concluded(game, game_probe):
    """A long round (a day's round beside the schedule's short ones) that closes after more than the
    newest rounds a pass looks at were opened: still concluded (summary, history, ``closed`` event),
    so it is purged after the retention like any other."""
    long_round = await rounds.open_round(game, duration_s=3600)
    for _ in range(history.CHECKED + 5):
        await rounds.open_round(game, duration_s=3600)
    await rounds.close_round(game, long_round.id)
    assert long_round.id in await history.conclude_closed(game)
    assert await history.read_summary(game, long_round.id) is not None
    assert [e["kind"] for e in game_probe.events(long_round.id)] == ["closed"]


async def test_a_refunded_guess_retried_before_the_close_is_waited_for(game, the_round):
    """A dead guess refunded, then retried by the operator (queued again, its marker still 'refunded'
    until it is recharged and scored): the conclusion waits for it as for any queued guess."""
    ada = await players.register(game, "Ada")
    await guesses.submit(game, the_round.id, ada.id, text(SECRET))
    [claim] = await game.bus.claim(1, lease_ms=60_000)
    await game.bus.fail(claim, "dies", retryable=False)
    assert (await refunds.refund(game, [claim.job]))[0].outcome is refunds.Refund.REFUNDED
    assert await history.pending_guesses(game, the_round.id) == 0, "dead and refunded: settled"
    assert await game.bus.retry_dead(claim.job)  # queued again
    await rounds.close_round(game, the_round.id)
    assert await history.pending_guesses(game, the_round.id) == 1
    assert await history.conclude_round(game, the_round.id) == (False, None), "waits for the retried guess"
    assert await score_worker.ScoreWorker(game).handle(await claim_job(game.bus)) is Finish.DONE
    done, summary = await history.conclude_round(game, the_round.id)
    assert done
    assert summary is not None
    assert [(w.name, w.standing.solved) for w in summary.board] == [("Ada", True)]
