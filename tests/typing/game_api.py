"""Only type-checked (``mypy --strict tests/typing``), never run: the README's game example type-checks."""

from __future__ import annotations

from codemojex import guesses, leaderboard, locks, players, rounds, wallet
from codemojex.game import Game
from codemojex.guesses import Outcome, Refusal, Submission
from codemojex.score_worker import ScoreWorker
from echomq import Worker


async def readme_game() -> None:
    async with Game.from_url("redis://127.0.0.1:6379/0", tag="cm") as game:
        round_ = await rounds.open_round(game)
        ada = await players.register(game, "Ada")
        first: Submission = await guesses.submit(game, round_.id, ada.id, "🍎🍌🍇🍒🥝🍑")
        again = await guesses.submit(game, round_.id, ada.id, "🍎🍌🍇🍒🥝🍑", job_id=first.job)
        assert (first.outcome, again.outcome) == (Outcome.ADMITTED, Outcome.DUPLICATE)
        blanks = await guesses.submit(game, round_.id, ada.id, [None, "🍌", "🍇", "🍒", "🥝", "🍑"])
        assert blanks.refusal in (None, Refusal.BAD_GUESS)
        await Worker(game.bus, ScoreWorker(game).handle).run()
        board: list[leaderboard.Entry] = await leaderboard.read_board(game, round_.id)
        assert board[0].standing.attempts >= 1
        held = await wallet.read_wallet(game, ada.id)
        assert wallet.reconcile(held) == []
        proven: dict[int, str] = await locks.read_proven(game, round_.id, ada.id)
        assert proven is not None
