"""Closed rounds keep their summary for good and their per-guess data for the retention
(:mod:`codemojex.retention`): many short rounds played with a tiny retention leave the key count flat
and the memory growing by the summaries alone; a round within the retention keeps everything; the
players' wallets and ledgers are never touched."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from codemojex import guesses, history, players, refunds, retention, rounds, schedule, score_worker, wallet
from codemojex.game import Game, GameSettings
from codemojex.upkeep import Upkeep
from echomq import Bus, Finish, Permanent, Settings, Worker
from tests.support.game import KEYBOARD, SECRET, claim_job, text
from tests.support.workers import eventually, running

WRONG = "🍎🍌🍒🍇🍑🍍"


@pytest.fixture
async def rich_game(redis_server, tag) -> AsyncIterator[Game]:
    """A game whose players can pay for every guess (a grant, no per-round allowance or reward: the
    economy's own tests are tests/game/test_economy.py), whose players' stats keep 4 rounds one by one,
    and whose bus keeps no finished job row."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(result_ttl_ms=0, dedup_window_ms=0))
    settings = GameSettings(grant=(("coin", 100_000),), allowance=(), solve_reward=(), results_kept=4)
    the_game = Game(bus, settings)
    yield the_game
    await the_game.aclose()


def _keys(client, tag):
    """Every key of the game and of its bus (the secrets' cmxs: included) without an expiry: one with
    an expiry (a claim's lost-reply record, kept one lease) is bounded by time, not by rounds."""
    found = []
    for pattern in (f"cmx:{{{tag}}}:*", f"cmxs:{{{tag}}}:*", f"emq:{{{tag}}}:*"):
        found += [raw.decode() for raw in client.scan_iter(match=pattern, count=1000)]
    return sorted(key for key in found if client.pttl(key) == -1)


def _shapes(keys):
    """The kinds of keys: names with their ids (RND..., PLR..., JOB..., hex) left out."""
    return {re.sub(r"(RND|PLR|JOB|GES|OPR)[0-9A-Z]{20,}|[0-9a-f]{24,}", "*", key) for key in keys}


def _memory(client, keys, *, skip=(":ledger:", ":results:", ":summaries", ":history")):
    """The memory of the keys but the ones that grow on purpose: the summaries and the history list
    (kept for good, a few hundred bytes a round), a player's ledger and stats (bounded per player by
    their own caps, checked apart)."""
    return sum(client.memory_usage(key) or 0 for key in keys if not any(part in key for part in skip))


async def _play_rounds(game, upkeep, people, count):
    for _ in range(count):
        played = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        for index, person in enumerate(people):
            await guesses.submit(game, played.id, person.id, WRONG)
            await guesses.submit(game, played.id, person.id, text(SECRET) if index == 0 else WRONG)
        async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
            await eventually(lambda w=worker: w.processed == 2 * len(people), what="scored")
        await rounds.close_round(game, played.id)
        await upkeep.run_pass()  # concludes it, and purges it at once (retention 0)


async def test_many_rounds_leave_the_key_count_flat(rich_game, sync_redis, tag):
    game = rich_game
    await schedule.write_settings(game, schedule.RoundSettings(retention_s=0))
    people = [await players.register(game, name) for name in ("Ada", "Bob", "Cy")]
    upkeep = Upkeep(game, every_s=0.1)
    await _play_rounds(game, upkeep, people, 5)
    keys_before = _keys(sync_redis, tag)
    memory_before = _memory(sync_redis, keys_before)
    summaries_before = sync_redis.memory_usage(game.keys.summaries)
    await _play_rounds(game, upkeep, people, 20)
    keys_after = _keys(sync_redis, tag)
    assert len(keys_after) <= len(keys_before), "20 more rounds leave no key behind"
    assert _shapes(keys_after) <= _shapes(keys_before), "no kind of key appears"
    assert _memory(sync_redis, keys_after) <= memory_before * 1.1 + 1024
    per_round = (sync_redis.memory_usage(game.keys.summaries) - summaries_before) / 20
    assert per_round < 1024, f"a summary takes {per_round:.0f} bytes a round"
    assert len(await history.list_history(game, 100)) == 25
    assert all(s.secret == SECRET and s.guesses == 6 for s in await history.list_history(game, 100))
    for person in people:  # a player's stats are bounded by results_kept (4 rounds + summary fields)
        assert sync_redis.hlen(game.keys.results(person.id)) <= 4 + 6
    for person in people:  # a player's own wallet and ledger are not round data
        assert sync_redis.llen(game.keys.ledger(person.id)) == 2 * 25 + 1


async def test_a_round_within_its_retention_keeps_its_guesses(game, the_round, player, sync_redis):
    await schedule.write_settings(game, schedule.RoundSettings(retention_s=3600))
    await guesses.submit(game, the_round.id, player.id, WRONG)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.processed == 1, what="scored")
    await rounds.close_round(game, the_round.id)
    await Upkeep(game, every_s=0.1).run_pass()
    assert await history.read_summary(game, the_round.id) is not None
    assert len(await guesses.player_guesses(game, the_round.id, player.id)) == 1
    assert sync_redis.zscore(game.keys.retained, the_round.id) is not None
    await retention.purge(game, retention_s=0)
    assert await guesses.player_guesses(game, the_round.id, player.id) == []
    assert not sync_redis.exists(game.keys.round(the_round.id), game.keys.secret(the_round.id))
    summary = await history.read_summary(game, the_round.id)
    assert summary is not None
    assert summary.secret == SECRET
    assert summary.guesses == 1


async def test_an_open_or_unconcluded_round_is_never_purged(game, the_round, sync_redis):
    await retention.purge(game, retention_s=0)
    assert sync_redis.exists(game.keys.round(the_round.id), game.keys.secret(the_round.id)) == 2


async def test_a_guess_scored_after_its_round_was_purged_mints_nothing(
    game, the_round, player, sync_redis, tag
):
    """A dead guess, refunded, retried by the operator only after its round's purge and delivered to a
    worker that still holds the round's rules: it is dead-lettered (no round), not scored. Scored, it
    would be free (the round's refund marker is purged, so no recharge), pay the solve reward a second
    time (the reward marker is purged) and recreate the round's keys, which no later pass purges."""
    await guesses.submit(game, the_round.id, player.id, text(SECRET))
    await guesses.submit(game, the_round.id, player.id, text(SECRET))  # admitted: not solved yet
    worker = score_worker.ScoreWorker(game)
    assert await worker.handle(await claim_job(game.bus)) is Finish.DONE  # keeps the round's rules
    [late] = await game.bus.claim(1, lease_ms=60_000)
    await game.bus.fail(late, "dies", retryable=False)
    assert (await refunds.refund(game, [late.job]))[0].outcome is refunds.Refund.REFUNDED
    rewarded = (await wallet.read_wallet(game, player.id)).balances
    assert rewarded == {"ticket": 2, "coin": 75}, "the allowance, one ticket (one refunded), one reward"
    await rounds.close_round(game, the_round.id)
    assert (await history.conclude_round(game, the_round.id))[0]
    assert await retention.purge(game, retention_s=0) == [the_round.id]
    game_keys = [key for key in _keys(sync_redis, tag) if not key.startswith("emq:")]
    assert await game.bus.retry_dead(late.job)
    with pytest.raises(Permanent):
        await worker.handle(await claim_job(game.bus))
    assert (await wallet.read_wallet(game, player.id)).balances == rewarded, "not free, no second reward"
    assert [key for key in _keys(sync_redis, tag) if not key.startswith("emq:")] == game_keys
    assert wallet.reconcile(await wallet.read_wallet(game, player.id)) == []


async def test_scheduled_rounds_with_the_economy_leave_the_key_count_flat(redis_server, tag, sync_redis):
    """The schedule on, the default economy (allowance and reward markers), the retention 0: each round
    is played (a solve and a miss), closed by the operator, concluded, purged, and the schedule opens
    the next; after the first rounds no key and no kind of key is added (but summaries and history)."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(result_ttl_ms=0, dedup_window_ms=0))
    game = Game(bus, GameSettings(results_kept=4))
    try:
        await schedule.write_settings(game, schedule.RoundSettings(on=True, gap_s=0, retention_s=0))
        people = [await players.register(game, name) for name in ("Ada", "Bob")]
        upkeep = Upkeep(game, every_s=0.1)
        worker = score_worker.ScoreWorker(game)

        async def play(count):
            for _ in range(count):
                await upkeep.run_pass()
                round_id = await schedule.scheduled_round(game)
                assert round_id is not None
                secret = await rounds.read_secret(game, round_id)
                keyboard = (await rounds.get_round(game, round_id)).keyboard.keys
                wrong = (next(k for k in keyboard if k != secret[0]), *secret[1:])  # not solving
                for person, guess in zip(people, (secret, wrong), strict=True):
                    admitted = await guesses.submit(game, round_id, person.id, text(guess))
                    assert admitted.outcome is guesses.Outcome.ADMITTED
                async with running(Worker(game.bus, worker.handle)) as running_worker:
                    await eventually(lambda w=running_worker: w.processed == 2, what="scored")
                await rounds.close_round(game, round_id)
                await upkeep.run_pass()  # concludes, purges (retention 0), opens the next

        await play(5)
        keys_before = _keys(sync_redis, tag)
        memory_before = _memory(sync_redis, keys_before)
        await play(15)
        keys_after = _keys(sync_redis, tag)
        assert _shapes(keys_after) <= _shapes(keys_before), "no kind of key appears"
        assert len(keys_after) <= len(keys_before)
        assert _memory(sync_redis, keys_after) <= memory_before * 1.1 + 1024
        assert sync_redis.zcard(game.keys.live) == 1, "the schedule's next round alone"
        for person in people:
            assert wallet.reconcile(await wallet.read_wallet(game, person.id)) == []
    finally:
        await game.aclose()


async def test_a_round_with_a_guess_still_queued_is_purged_only_once_it_is_scored(
    game, the_round, player, sync_redis, monkeypatch
):
    """Concluded past its grace with a guess still queued (a backlog longer than the grace) and due for
    the purge (retention 0): the purge waits for that guess, which is then scored and paid, never
    dead-lettered unscored with its charge gone."""
    monkeypatch.setattr(history, "SETTLE_GRACE_MS", 0)
    await guesses.submit(game, the_round.id, player.id, text(SECRET))
    await rounds.close_round(game, the_round.id)
    assert (await history.conclude_round(game, the_round.id))[0]
    assert await retention.purge(game, retention_s=0) == [], "a guess of the round is still queued"
    assert sync_redis.exists(game.keys.round(the_round.id), game.keys.charges(the_round.id)) == 2
    worker = score_worker.ScoreWorker(game)
    assert await worker.handle(await claim_job(game.bus)) is Finish.DONE
    assert (await wallet.read_wallet(game, player.id)).balances == {"ticket": 2, "coin": 75}
    assert await retention.purge(game, retention_s=0) == [the_round.id]
