"""A true retry is always a duplicate: idempotency is decided on the request as the client sent it (round,
player, the guess before the locks are overlaid), never on the player's locks, which may change between
a request and its retry."""

from __future__ import annotations

import json

import pytest

from codemojex import guesses, locks, score_worker
from codemojex.errors import InvalidId
from codemojex.guesses import Outcome
from echomq import Finish, ids
from tests.support.game import claim_job, text

# Against the secret 🍎🍌🍇🍎🍒🥝 this proves positions 0 and 1 (🍎, 🍌) and nothing else.
PROBE_GUESS = ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑")


async def _prove_position_0(game, the_round, player) -> None:
    await guesses.submit(game, the_round.id, player.id, text(PROBE_GUESS))
    assert await score_worker.handle(game, await claim_job(game.bus)) is Finish.DONE


def _charges_of(game_probe, player_id, job):
    entries = [json.loads(raw) for raw in game_probe.client.lrange(game_probe.keys.ledger(player_id), 0, -1)]
    return [entry for entry in entries if entry["job"] == job]


async def test_a_retry_after_an_unlock_is_a_duplicate_charged_once(game, the_round, player, game_probe):
    """Lock, submit with a job id, unlock, retry the same request: duplicate, the original charge, once."""
    await _prove_position_0(game, the_round, player)
    await locks.lock(game, the_round.id, player.id, 0)
    job = ids.mint("JOB")
    first = await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝", job_id=job)
    assert first.outcome is Outcome.ADMITTED
    assert first.guess == ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")  # the lock overlaid
    await locks.unlock(game, the_round.id, player.id, 0)
    wallet_before = game_probe.client.hgetall(game.keys.wallet(player.id))
    again = await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝", job_id=job)
    assert again.outcome is Outcome.DUPLICATE, again
    assert again.charged == first.charged
    assert again.guess == first.guess  # the guess as admitted, not as it would be overlaid now
    assert game_probe.client.hgetall(game.keys.wallet(player.id)) == wallet_before
    assert [entry["reason"] for entry in _charges_of(game_probe, player.id, job)] == ["guess"]


async def test_a_retry_after_a_new_lock_is_a_duplicate_charged_once(game, the_round, player, game_probe):
    """Submit with a job id, lock a position the guess did not have, retry: duplicate, charged once."""
    await _prove_position_0(game, the_round, player)
    job = ids.mint("JOB")
    first = await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝", job_id=job)
    assert first.outcome is Outcome.ADMITTED
    await locks.lock(game, the_round.id, player.id, 0)
    again = await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝", job_id=job)
    assert again.outcome is Outcome.DUPLICATE, again
    assert again.guess == ("🍑", "🍌", "🍇", "🍎", "🍒", "🥝")
    assert [entry["reason"] for entry in _charges_of(game_probe, player.id, job)] == ["guess"]


async def test_a_retry_whose_blank_lost_its_lock_is_a_duplicate(game, the_round, player, game_probe):
    """A blank filled by a lock that is gone by the retry: the retry is still a duplicate, not a bad guess."""
    await _prove_position_0(game, the_round, player)
    await locks.lock(game, the_round.id, player.id, 0)
    job = ids.mint("JOB")
    first = await guesses.submit(game, the_round.id, player.id, "_🍌🍇🍎🍒🥝", job_id=job)
    assert first.outcome is Outcome.ADMITTED
    await locks.unlock(game, the_round.id, player.id, 0)
    again = await guesses.submit(game, the_round.id, player.id, "_🍌🍇🍎🍒🥝", job_id=job)
    assert again.outcome is Outcome.DUPLICATE, again
    assert again.guess == first.guess
    assert [entry["reason"] for entry in _charges_of(game_probe, player.id, job)] == ["guess"]


async def test_another_request_under_the_same_job_id_is_still_a_conflict(game, the_round, player, game_probe):
    """A different guess text under the job id is a conflict, even if the overlay would make them equal."""
    await _prove_position_0(game, the_round, player)
    await locks.lock(game, the_round.id, player.id, 0)
    job = ids.mint("JOB")
    await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝", job_id=job)
    before = game_probe.snapshot()
    other = await guesses.submit(game, the_round.id, player.id, "🍇🍌🍇🍎🍒🥝", job_id=job)  # same overlaid
    assert other.refusal is guesses.Refusal.IDEMPOTENCY_CONFLICT
    stats = game.bus.keys.stats
    after = game_probe.snapshot()
    assert {k: v for k, v in after.items() if k != stats} == {k: v for k, v in before.items() if k != stats}


async def test_a_job_id_minted_far_from_now_is_refused_and_charges_nothing(
    game, the_round, player, game_probe
):
    """A job id minted more than the dedup window or 6 h from now is refused with InvalidId before any
    call, as echomq's enqueue refuses it (ids of one made-up timestamp would pile their tombstones into
    one hash): nothing is charged and nothing is queued."""
    now_ms = ids.timestamp_ms(ids.mint("JOB"))
    wallet_before = game_probe.client.hgetall(game.keys.wallet(player.id))
    span_ms = max(game.bus.settings.dedup_window_ms, 6 * 3_600_000)
    for off_ms in (-span_ms - 60_000, span_ms + 60_000):
        old = ids.from_body("JOB", (now_ms + off_ms).to_bytes(6, "big") + bytes(8))
        with pytest.raises(InvalidId, match="mint a new one"):
            await guesses.submit(game, the_round.id, player.id, text(PROBE_GUESS), job_id=old)
    assert game_probe.client.hgetall(game.keys.wallet(player.id)) == wallet_before
    assert game_probe.bus.counters().get("admitted", 0) == 0
