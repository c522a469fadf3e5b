"""The score worker is the authority: it reads the secret, scores, and writes the record once. A job
payload it cannot read (the host would never write it) is dead-lettered at once, with the reason."""

from __future__ import annotations

import pytest

from codemojex import guesses, players, rounds, score_worker
from codemojex.errors import InvalidPayload
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from codemojex.payload import decode_payload, encode_payload
from echomq import Bus, Finish, Job, Settings, Worker, ids, rows
from tests.support.game import KEYBOARD, SECRET, GameProbe, text
from tests.support.workers import eventually, running


async def test_a_worker_scores_a_guess_with_per_position_feedback(game, the_round, player, game_probe):
    """🍎🍌🍒🍇🍑🍍 against 🍎🍌🍇🍎🍒🥝: hit hit near near miss miss, proven hits at 0 and 1."""
    submitted = await guesses.submit(game, the_round.id, player.id, "🍎🍌🍒🍇🍑🍍")
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.processed == 1, what="scored")
    record = await guesses.get_guess(game, guess_of(submitted.job))
    assert record is not None
    assert record.feedback.code() == "HHNN--"
    assert (record.feedback.hits, record.feedback.nears) == (2, 2)
    assert record.guess == ("🍎", "🍌", "🍒", "🍇", "🍑", "🍍")
    assert (record.round, record.player, record.job) == (the_round.id, player.id, submitted.job)
    assert record.submitted_ms <= record.scored_ms
    listed = await guesses.player_guesses(game, the_round.id, player.id)
    assert [(g.job, g.state) for g in listed] == [(submitted.job, "scored")]
    assert game_probe.client.hgetall(game.keys.proven(the_round.id, player.id)) == {
        b"0": "🍎".encode(),
        b"1": "🍌".encode(),
    }
    info = await game.bus.inspect(submitted.job)
    assert info.state.value == "done"
    assert info.result == f"{guess_of(submitted.job)} HHNN--".encode()


async def test_queued_guesses_show_as_queued_until_scored(game, the_round, player):
    """player_guesses shows where each admitted guess is, before any worker runs."""
    first = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    listed = await guesses.player_guesses(game, the_round.id, player.id)
    assert [(g.job, g.state, g.record) for g in listed] == [(first.job, "queued", None)]
    assert listed[0].guess == SECRET


BAD_PAYLOADS = [
    b"not json",
    b"[]",
    b'{"v":1}',
    b'{"v":2,"round":"R","player":"P","guess":[]}',
    b'{"guess":["x"],"player":"PLR","round":"RND","v":1}',
]


@pytest.mark.parametrize("payload", BAD_PAYLOADS)
async def test_an_unreadable_payload_is_dead_lettered_at_once(game, player, payload):
    """No retry can fix a payload the host would never write: one try, then dead, with the reason."""
    job = ids.mint("JOB")
    await game.bus.enqueue(job, lane=player.id, payload=payload, max_attempts=5)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.counts.dead == 1, what="dead-lettered")
    info = await game.bus.inspect(job)
    assert (info.state.value, info.tries) == ("dead", 1)
    assert "payload" in (info.error or "")


async def test_a_guess_for_no_round_a_wrong_lane_or_off_keyboard_keys_is_dead_lettered(
    game, the_round, player
):
    """Payloads that parse but cannot be true: an unknown round, another player's lane, foreign keys."""
    other = ids.mint("PLR")
    cases = {
        "no round": (player.id, encode_payload(ids.mint("RND"), player.id, SECRET)),
        "wrong lane": (other, encode_payload(the_round.id, player.id, SECRET)),
        "off keyboard": (player.id, encode_payload(the_round.id, player.id, ("🐶",) * 6)),
        "too short": (player.id, encode_payload(the_round.id, player.id, SECRET[:5])),
    }
    jobs = {}
    for name, (lane, payload) in cases.items():
        jobs[name] = ids.mint("JOB")
        await game.bus.enqueue(jobs[name], lane=lane, payload=payload)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.counts.dead == len(cases), what="all dead-lettered")
    for name, job in jobs.items():
        info = await game.bus.inspect(job)
        assert info.state.value == "dead", name
        assert await guesses.get_guess(game, guess_of(job)) is None


def test_the_payload_is_canonical_and_round_trips():
    """Sorted keys, no spaces, UTF-8: a retry is byte-identical, and decode gives back what was encoded."""
    rnd, plr = ids.mint("RND"), ids.mint("PLR")
    payload = encode_payload(rnd, plr, SECRET)
    assert payload == encode_payload(rnd, plr, list(SECRET))
    assert payload.startswith(b'{"guess":["')
    decoded = decode_payload(payload)
    assert (decoded.round, decoded.player, decoded.guess) == (rnd, plr, SECRET)
    with pytest.raises(InvalidPayload):
        decode_payload(
            b'{"guess":[""],"player":"' + plr.encode() + b'","round":"' + rnd.encode() + b'","v":1}'
        )


async def test_a_score_worker_keeps_the_rules_of_the_rounds_it_scored(game, the_round, player):
    """After one job the round's keyboard and secret are kept; the cache forgets the oldest past its size."""
    scorer = score_worker.ScoreWorker(game)
    await guesses.submit(game, the_round.id, player.id, text(SECRET))
    claims = await game.bus.claim(1)
    assert await scorer.handle(Job(claims[0])) is Finish.DONE
    assert scorer.rules[the_round.id].secret == SECRET
    assert scorer.rules[the_round.id].keyboard == the_round.keyboard
    recent = score_worker._Recent(2)
    for name in ("a", "b", "c"):
        recent[name] = scorer.rules[the_round.id]
    assert list(recent) == ["b", "c"]


async def test_scoring_trims_the_expired_done_rows_of_earlier_guesses(redis_server, tag):
    """score.lua completes through the finish include, so with result_ttl 0 each scored guess trims the
    done rows of earlier ones to tombstones: done holds one row, the records stay, duplicates are absorbed."""
    settings = Settings(result_ttl_ms=0, dedup_window_ms=600_000)
    game = Game(Bus.from_url(redis_server.url, tag=tag, settings=settings), GameSettings())
    try:
        the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        player = await players.register(game, "Ada")
        scorer = score_worker.ScoreWorker(game)
        scored = []
        played = ("🍎🍌🍒🍇🍑🍍", "🍌🍎🍒🍇🍑🍍", text(SECRET))
        for guess in played:
            await guesses.submit(game, the_round.id, player.id, guess)
            [claim] = await game.bus.claim(1)
            assert await scorer.handle(Job(claim)) is Finish.DONE
            scored.append(claim)
        assert await game.redis.zrange(game.bus.keys.done, 0, -1) == [scored[-1].job.encode()]
        for claim, guess in zip(scored[:2], played[:2], strict=True):
            assert (await game.bus.inspect(claim.job)).trimmed is True
            assert await guesses.get_guess(game, guess_of(claim.job)) is not None
            again = await guesses.submit(game, the_round.id, player.id, guess, job_id=claim.job)
            assert again.outcome is Outcome.DUPLICATE
        assert (await game.bus.stats()).counters["trimmed"] == 2
    finally:
        await game.aclose()


async def test_a_score_of_a_claim_of_the_jobs_earlier_life_is_refused_as_stale(redis_server, sync_redis, tag):
    """A guess job's id forgotten by the bus and admitted anew restarts its token: the new life's claim
    holds token 1, as the old life's did. score.lua fences by the claim's request id too, so the old
    claim's call (a retry whose reply was lost) is stale and changes nothing, and the new claim scores.
    The game refuses a reused job id at submit (tests/game/test_job_id_reuse.py), so the id is admitted
    anew on the bus directly."""
    settings = Settings(result_ttl_ms=0, dedup_window_ms=0, dead_ttl_ms=0)
    game = Game(Bus.from_url(redis_server.url, tag=tag, settings=settings), GameSettings())
    try:
        the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        player = await players.register(game, "Ada")
        admitted = await guesses.submit(game, the_round.id, player.id, "🍎🍌🍒🍇🍑🍍")
        payload = rows.payload_of(sync_redis.hgetall(game.bus.keys.job(admitted.job)))
        [old] = await game.bus.claim(1)
        assert await score_worker.handle(game, Job(old)) is Finish.DONE
        assert (await game.bus.sweep()).trimmed == 1
        assert not sync_redis.exists(game.bus.keys.job(old.job))  # forgotten: the tombstone expired
        await game.bus.enqueue(old.job, lane=player.id, payload=payload)
        [new] = await game.bus.claim(1)
        assert (new.job, new.token) == (old.job, old.token)

        probe = GameProbe.of(sync_redis, game)
        before = probe.snapshot()
        stale = (await game.bus.stats()).counters.get("stale", 0)
        assert await score_worker.handle(game, Job(old)) is Finish.STALE
        assert (await game.bus.stats()).counters["stale"] == stale + 1
        after = probe.snapshot()
        stats = game.bus.keys.stats
        assert {k: v for k, v in after.items() if k != stats} == {
            k: v for k, v in before.items() if k != stats
        }
        assert await score_worker.handle(game, Job(new)) is Finish.DONE
        assert sync_redis.hget(game.bus.keys.job(new.job), rows.STATE) == b"done"
    finally:
        await game.aclose()
