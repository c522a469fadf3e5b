"""Locks: only a position a scored guess proved a hit can be locked; submit overlays the locks."""

from __future__ import annotations

import pytest

from codemojex import guesses, locks, rounds, score_worker
from codemojex.errors import InvalidOption, NotProven, RoundClosed, UnknownRound
from codemojex.guesses import Outcome, Refusal
from echomq import Finish, ids
from tests.support.game import claim_job, text

# Against the secret 🍎🍌🍇🍎🍒🥝 this proves positions 0 and 1 (🍎, 🍌) and nothing else.
PROBE_GUESS = ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑")


async def _score_one(game) -> None:
    assert await score_worker.handle(game, await claim_job(game.bus)) is Finish.DONE


async def test_nothing_can_be_locked_before_a_scored_guess_proves_it(game, the_round, player, game_probe):
    """No scored guess yet: NotProven, and nothing changes."""
    before = game_probe.snapshot()
    with pytest.raises(NotProven):
        await locks.lock(game, the_round.id, player.id, 0)
    assert game_probe.snapshot() == before


async def test_a_proven_hit_can_be_locked_and_submit_overlays_it(game, the_round, player):
    """After a scored guess proves 🍎🍌 at 0 and 1, locks fill those slots whatever the player types."""
    await guesses.submit(game, the_round.id, player.id, text(PROBE_GUESS))
    await _score_one(game)
    assert await locks.read_proven(game, the_round.id, player.id) == {0: "🍎", 1: "🍌"}
    with pytest.raises(NotProven):
        await locks.lock(game, the_round.id, player.id, 2)  # a near or a miss proves nothing

    assert await locks.lock(game, the_round.id, player.id, 0) == "🍎"
    assert await locks.lock(game, the_round.id, player.id, 1) == "🍌"
    assert await locks.read_locks(game, the_round.id, player.id) == {0: "🍎", 1: "🍌"}

    blanks = await guesses.submit(game, the_round.id, player.id, "__🍇🍎🍒🥝")
    assert blanks.outcome is Outcome.ADMITTED
    assert blanks.guess == ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")
    overridden = await guesses.submit(game, the_round.id, player.id, ["🍑", "🍑", "🍇", "🍎", None, "🥝"])
    assert overridden.refusal is Refusal.BAD_GUESS  # position 4 is blank and not locked
    assert overridden.problem == "blank"
    typed_over = await guesses.submit(game, the_round.id, player.id, "🍑🍑🍇🍎🍒🥝")
    assert typed_over.guess == ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")  # a lock wins over what was typed


async def test_unlock_removes_the_overlay(game, the_round, player):
    """After unlock the slot is the player's again; unlocking twice answers False."""
    await guesses.submit(game, the_round.id, player.id, text(PROBE_GUESS))
    await _score_one(game)
    await locks.lock(game, the_round.id, player.id, 0)
    assert await locks.unlock(game, the_round.id, player.id, 0) is True
    assert await locks.unlock(game, the_round.id, player.id, 0) is False
    free = await guesses.submit(game, the_round.id, player.id, "🍑🍌🍇🍎🍒🥝")
    assert free.guess == ("🍑", "🍌", "🍇", "🍎", "🍒", "🥝")


async def test_locks_are_refused_in_a_closed_round_and_for_bad_positions(game, the_round, player):
    """A closed round: RoundClosed; a position outside 0-5 or not an int: InvalidOption; no round: Unknown."""
    await guesses.submit(game, the_round.id, player.id, text(PROBE_GUESS))
    await _score_one(game)
    for position in (-1, 6, 1.0, "0", True, None):
        with pytest.raises(InvalidOption):
            await locks.lock(game, the_round.id, player.id, position)  # type: ignore[arg-type]
    with pytest.raises(UnknownRound):
        await locks.lock(game, ids.mint("RND"), player.id, 0)
    await rounds.close_round(game, the_round.id)
    with pytest.raises(RoundClosed):
        await locks.lock(game, the_round.id, player.id, 0)
