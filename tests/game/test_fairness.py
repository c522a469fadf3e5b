"""Lanes rotate: one masher with thousands of queued guesses cannot starve the field."""

from __future__ import annotations

import asyncio

from codemojex import guesses, players, score_worker, wallet
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from echomq import Finish, Job
from tests.support.game import text

MASHER_GUESSES = 5_000
OTHERS = 50


async def test_a_masher_with_5000_queued_guesses_cannot_starve_50_other_players(game, the_round, game_probe):
    """Every other player's one guess is scored within the first 51 claims."""
    roomy = Game(game.bus, GameSettings(max_queued=MASHER_GUESSES))
    masher = await players.register(roomy, "masher")
    await wallet.credit(roomy, masher.id, "ticket", MASHER_GUESSES, reason="test_grant")
    guess = text(("🍍",) * 6)
    for start in range(0, MASHER_GUESSES, 100):
        batch = await asyncio.gather(
            *(guesses.submit(roomy, the_round.id, masher.id, guess) for _ in range(start, start + 100))
        )
        assert {s.outcome for s in batch} == {Outcome.ADMITTED}
    others = [await players.register(roomy, f"player {n}") for n in range(OTHERS)]
    their_jobs = {}
    for other in others:
        submission = await guesses.submit(roomy, the_round.id, other.id, text(("🥥",) * 6))
        assert submission.outcome is Outcome.ADMITTED
        their_jobs[other.id] = submission.job

    served: list[str] = []
    for _ in range(OTHERS + 1):
        claims = await roomy.bus.claim(1)
        assert len(claims) == 1
        assert await score_worker.handle(roomy, Job(claims[0])) is Finish.DONE
        served.append(claims[0].lane)

    assert set(their_jobs) <= set(served)
    assert served.count(masher.id) == 1
    scored = set(game_probe.records(the_round.id))
    assert {guess_of(job) for job in their_jobs.values()} <= scored
    assert len(scored) == OTHERS + 1
    assert game_probe.bus.counters()["admitted"] == MASHER_GUESSES + OTHERS
