"""Per-player stats on real Redis: kept by score.lua per round, whatever the delivery order or count.

``score.lua`` keeps one field a round in ``results:<PLR>`` (attempts to solve, 0 played and unsolved),
written only with a new record; :func:`codemojex.player_stats.read_stats` summarises it
(:mod:`codemojex.streaks`)."""

from __future__ import annotations

from codemojex import guesses, player_stats, players, rounds, score_worker
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.payload import decode_payload
from codemojex.streaks import PlayerStats
from echomq import Bus, Finish, Job
from tests.support.game import KEYBOARD, SECRET, GameProbe, claim_job, text

MISS = ("🍑",) * 6
NEAR = ("🍌", "🍑", "🍑", "🍑", "🍑", "🍑")


async def admit(game, round_id, player_id, guess) -> str:
    submitted = await guesses.submit(game, round_id, player_id, text(guess))
    assert submitted.outcome is Outcome.ADMITTED
    assert submitted.job is not None
    return submitted.job


async def score_all(game) -> None:
    while claims := await game.bus.claim(10, lease_ms=30_000):
        for claim in claims:
            assert await score_worker.handle(game, Job(claim)) is Finish.DONE


async def new_round(game):
    return await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))


async def test_a_new_player_has_empty_stats(game, player):
    """No scored guess yet: nothing played."""
    assert await player_stats.read_stats(game, player.id) == PlayerStats(0, 0, None, 0, 0)


async def test_two_rounds_solved_then_missed(game, player, game_probe: GameProbe):
    """R1 solved in 2, R2 played and closed unsolved: 2 played, 1 solved, best 2, streak 0 (best 1)."""
    first = await new_round(game)
    await admit(game, first.id, player.id, MISS)
    await admit(game, first.id, player.id, SECRET)
    second = await new_round(game)
    await admit(game, second.id, player.id, NEAR)
    await score_all(game)
    assert await player_stats.read_stats(game, player.id) == PlayerStats(2, 1, 2, 1, 1)  # R2 still open
    await rounds.close_round(game, second.id)
    assert await player_stats.read_stats(game, player.id) == PlayerStats(2, 1, 2, 0, 1)
    assert game_probe.client.hgetall(game.keys.results(player.id)) == {
        first.id.encode(): b"2",
        second.id.encode(): b"0",
    }


async def test_a_redelivered_or_retried_score_counts_once(game, the_round, player, game_probe):
    """The effect lands, the acknowledgement is lost, the job is redelivered and scored again, and the
    same call is retried: the round counts once, solved in 1."""
    await admit(game, the_round.id, player.id, SECRET)
    claim = (await game.bus.claim(1, lease_ms=30_000))[0]
    request = decode_payload(claim.payload)
    call = score_worker.score_call(game, claim, request, score(SECRET, request.guess), finish=False)
    assert int((await game.run("score", *call))[0]) == 2  # the effect, no completion
    assert int((await game.run("score", *call))[0]) == 2  # the same call again: found, no change
    game_probe.bus.expire(claim.job)
    assert (await game.bus.sweep()).reclaimed == 1
    again = await claim_job(game.bus)
    assert await score_worker.handle(game, again) is Finish.DONE
    assert await score_worker.handle(game, again) is Finish.DONE  # a retried finishing call
    assert await player_stats.read_stats(game, player.id) == PlayerStats(1, 1, 1, 1, 1)
    assert game_probe.client.hgetall(game.keys.results(player.id)) == {the_round.id.encode(): b"1"}


async def test_the_solve_counts_its_attempts_in_admission_order_whatever_the_delivery(
    game, the_round, player, game_probe
):
    """Miss, near, solve admitted in that order and scored solve first: the round ends solved in 3,
    as if scored in order; the stream says "newly solved" once, on the first solving record."""
    jobs = [await admit(game, the_round.id, player.id, guess) for guess in (MISS, NEAR, SECRET)]
    claims = {c.job: c for c in await game.bus.claim(3, lease_ms=30_000)}
    for job in reversed(jobs):
        assert await score_worker.handle(game, Job(claims[job])) is Finish.DONE
        if job == jobs[-1]:
            assert (await player_stats.read_stats(game, player.id)).best_attempts == 1
    assert await player_stats.read_stats(game, player.id) == PlayerStats(1, 1, 3, 1, 1)
    newly = [e for e in game_probe.events(the_round.id) if e.get("newly") == "1"]
    assert [(e["player"], e["attempts"]) for e in newly] == [(player.id, "1")]


async def test_a_second_solving_guess_is_no_second_solve(game, the_round, player, game_probe):
    """Two solving guesses admitted before either is scored, scored later one first: one solve, in 1."""
    jobs = [await admit(game, the_round.id, player.id, SECRET) for _ in range(2)]
    claims = {c.job: c for c in await game.bus.claim(2, lease_ms=30_000)}
    for job in reversed(jobs):
        assert await score_worker.handle(game, Job(claims[job])) is Finish.DONE
    assert await player_stats.read_stats(game, player.id) == PlayerStats(1, 1, 1, 1, 1)
    assert len([e for e in game_probe.events(the_round.id) if e.get("newly") == "1"]) == 1


async def test_the_streak_over_three_rounds(game, player):
    """Solved, solved, solved: a streak of 3; best attempts is the fewest of the three."""
    for guesses_played in ((SECRET,), (MISS, SECRET), (MISS, NEAR, SECRET)):
        the_round = await new_round(game)
        for guess in guesses_played:
            await admit(game, the_round.id, player.id, guess)
        await score_all(game)
        await rounds.close_round(game, the_round.id)
    assert await player_stats.read_stats(game, player.id) == PlayerStats(3, 3, 1, 3, 3)


async def test_results_past_the_kept_rounds_fold_into_a_summary(redis_server, tag, game_probe):
    """With 2 rounds kept: four rounds played leave two round fields and a summary, and the stats are
    those of all four; a late guess of a round already folded changes nothing."""
    small = Game(Bus.from_url(redis_server.url, tag=tag), GameSettings(results_kept=2))
    try:
        ada = await players.register(small, "Ada")
        first = await new_round(small)
        late = await admit(small, first.id, ada.id, MISS)  # scored only after the fold
        round_ids = [first.id]
        for plays in ((SECRET,), (MISS,), (NEAR, SECRET), (SECRET,)):
            the_round = await new_round(small)
            round_ids.append(the_round.id)
            for guess in plays:
                await admit(small, the_round.id, ada.id, guess)
            while claims := await small.bus.claim(10, lease_ms=30_000):
                for claim in claims:
                    if claim.job == late:
                        held = claim
                        continue
                    assert await score_worker.handle(small, Job(claim)) is Finish.DONE
            await rounds.close_round(small, the_round.id)
        expected = PlayerStats(4, 3, 1, 2, 2)  # R2 solved, R3 missed, R4 solved in 2, R5 solved in 1
        assert await player_stats.read_stats(small, ada.id) == expected
        stored = {
            k.decode(): v.decode() for k, v in game_probe.client.hgetall(small.keys.results(ada.id)).items()
        }
        assert sorted(k for k in stored if k.startswith("RND")) == round_ids[-2:]
        assert stored["upto"] == round_ids[2]
        assert await score_worker.handle(small, Job(held)) is Finish.DONE  # R1's guess, long after
        assert await player_stats.read_stats(small, ada.id) == expected
    finally:
        await small.aclose()
