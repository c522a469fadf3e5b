"""The game on a real three-node Redis Cluster: its keys share the bus's hash tag, so submit.lua and
score.lua (game keys and queue keys together) run whole on the node that owns the tag."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codemojex import guesses, leaderboard, players, rounds, score_worker, wallet
from codemojex.game import Game
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from echomq import Worker
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import ROOT, eventually, running


@pytest.fixture(scope="module")
def cluster():
    with RedisClusterProcesses(3) as nodes:
        yield nodes


@pytest.mark.parametrize("tag", ["cm", "game-7"])
async def test_a_round_is_played_whole_on_a_cluster(cluster, tag):
    """Open, register, submit (and a duplicate), score by a worker, board and wallet, all on a cluster."""
    async with Game.from_url(f"redis://127.0.0.1:{cluster.ports[0]}/0", tag=tag, cluster=True) as game:
        the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        ada = await players.register(game, "Ada")
        first = await guesses.submit(game, the_round.id, ada.id, text(SECRET))
        again = await guesses.submit(game, the_round.id, ada.id, text(SECRET), job_id=first.job)
        assert (first.outcome, again.outcome) == (Outcome.ADMITTED, Outcome.DUPLICATE)
        async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
            await eventually(lambda: worker.processed == 1, 30, "scored on the cluster")
        record = await guesses.get_guess(game, guess_of(first.job))
        assert record is not None
        assert record.feedback.solved
        board = await leaderboard.read_board(game, the_round.id)
        assert [(entry.name, entry.standing.solved) for entry in board] == [("Ada", True)]
        held = await wallet.read_wallet(game, ada.id)
        assert [e.reason for e in held.ledger] == ["allowance", "allowance", "guess", "reward"]
        assert held.balances == {
            "coin": 50 + 25,
            "ticket": 2,
        }  # the allowance, a ticket spent, the solve reward
        assert wallet.reconcile(held) == []


def test_the_cli_plays_on_a_cluster(cluster):
    """`codemojex --cluster` opens a round, registers, guesses and reads the wallet through one node."""
    url = f"redis://127.0.0.1:{cluster.ports[1]}/0"

    def cli(*args: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "codemojex.cli", "--redis-url", url, "--cluster", "--tag", "t42", "--json",
             *args],
            cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    the_round = cli("round", "open", "--keyboard", "".join(KEYBOARD))
    ada = cli("player", "new", "Ada")
    guess = cli("guess", the_round["id"], ada["id"], text(SECRET))
    assert guess["outcome"] == "admitted"
    assert cli("wallet", ada["id"])["balances"] == {"coin": 50, "ticket": 2}
