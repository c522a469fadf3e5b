"""Throwaway accounts do not buy first place (issue 12): the attack on a real game, on real Redis.

Feedback is per position, so a free account's seven one-emoji guesses reveal a round's code; the main
account then solves in one attempt. Ranked on attempts it would rank first above an honest solver who
solved earlier; ranked on solve time (:mod:`codemojex.ranking`) the information bought on another account
arrives no sooner than the honest player's own, and the main account ranks after the honest solver.
"""

from __future__ import annotations

import asyncio

from codemojex import guesses, leaderboard, players, score_worker
from codemojex.engine import Mark
from codemojex.game import Game
from codemojex.guesses import Outcome
from echomq import Finish, Job
from tests.support.game import KEYBOARD, SECRET, GameProbe, text


async def _score_all(game: Game) -> None:
    while claims := await game.bus.claim(10):
        for claim in claims:
            assert await score_worker.handle(game, Job(claim)) is Finish.DONE


async def _admit(game: Game, round_id: str, player_id: str, guess: tuple[str, ...]) -> str:
    submitted = await guesses.submit(game, round_id, player_id, text(guess))
    assert submitted.outcome is Outcome.ADMITTED
    return submitted.job


async def _after(game_probe: GameProbe, job: str) -> None:
    """Wait until the Redis clock has passed ``job``'s admission millisecond (admissions in one ms tie)."""
    admitted_at = int(game_probe.bus.field(job, "created") or -1)
    while game_probe.bus.now_ms() <= admitted_at:
        await asyncio.sleep(0.001)


async def _reveal(game: Game, round_id: str, player_id: str) -> tuple[str, ...]:
    """The attack: one one-emoji guess per key but the last; each hit shows a position of that key."""
    for key in KEYBOARD[:-1]:
        await _admit(game, round_id, player_id, (key,) * 6)
    await _score_all(game)
    code = [KEYBOARD[-1]] * 6  # a position no probe hit holds the last key
    for record in await leaderboard.scored_records(game, round_id):
        if record.player == player_id:
            for position, mark in enumerate(record.feedback.marks):
                if mark is Mark.HIT:
                    code[position] = record.guess[position]
    return tuple(code)


async def test_a_code_revealed_on_a_throwaway_account_does_not_rank_above_an_earlier_honest_solve(
    game, the_round, game_probe
):
    honest = await players.register(game, "honest")
    throwaway = await players.register(game, "throwaway")
    main = await players.register(game, "main")

    revealed = await _reveal(game, the_round.id, throwaway.id)
    assert revealed == SECRET  # the free account's round allowance bought the whole code

    for guess in (("🍎", "🍌", "🍑", "🍑", "🍑", "🍑"), ("🍎", "🍌", "🍇", "🍎", "🍑", "🍑"), SECRET):
        honest_solve = await _admit(game, the_round.id, honest.id, guess)
        await _score_all(game)
    await _after(game_probe, honest_solve)
    await _admit(game, the_round.id, main.id, revealed)  # one attempt, after the honest solve
    await _score_all(game)

    board = await leaderboard.read_board(game, the_round.id)
    assert [(entry.name, entry.standing.solved, entry.standing.attempts) for entry in board] == [
        ("honest", True, 3),
        ("main", True, 1),
        ("throwaway", False, 7),
    ]
    records = await leaderboard.scored_records(game, the_round.id)
    assert leaderboard.recompute(records) == [entry.standing for entry in board]


async def test_attempts_bought_elsewhere_do_not_lift_an_unsolved_player_either(game, the_round, game_probe):
    """Two players reach the same best feedback: the one who reached it first ranks first, although the
    other reached it in fewer attempts (with what a throwaway account told them)."""
    honest, main = await players.register(game, "honest"), await players.register(game, "main")
    five_hits = (*SECRET[:5], "🍑")
    await _admit(game, the_round.id, honest.id, ("🍑",) * 6)
    honest_best = await _admit(game, the_round.id, honest.id, five_hits)
    await _score_all(game)
    await _after(game_probe, honest_best)
    await _admit(game, the_round.id, main.id, five_hits)
    await _score_all(game)

    board = await leaderboard.read_board(game, the_round.id)
    assert [(entry.name, entry.standing.best_hits, entry.standing.attempts) for entry in board] == [
        ("honest", 5, 2),
        ("main", 5, 1),
    ]
