"""The game through a master's failover, on a real Redis Cluster of three masters with one replica each:
players submit durably (``wait_replicas=1``) and an in-process score worker scores while the master that
serves the game's slot is SIGKILLed, its replica promoted, and the old master rejoins as a replica."""

from __future__ import annotations

import asyncio
import random

import pytest
import redis

from codemojex import guesses, leaderboard, players, rounds, score_worker, wallet
from codemojex.conformance import invariants
from codemojex.errors import NotDurable, Unavailable
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from echomq import Settings, Worker, ids
from echomq.keyspace import Keyspace
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.cluster import slot_master
from tests.support.game import KEYBOARD, SECRET
from tests.support.workers import eventually, running

DURABLE = Settings(wait_replicas=1, wait_timeout_ms=500)
SETTINGS = GameSettings(max_queued=100_000)
PLAYERS = 4


class Players:
    """Players guessing until told to stop, each guess retried with its JOB id until answered."""

    def __init__(self, game: Game, round_id: str, joined: list[str]) -> None:
        self.game, self.round_id, self.joined = game, round_id, joined
        self.acknowledged: set[str] = set()
        self.retried = 0  # answers that came only after an Unavailable (NotDurable among them)
        self.not_durable_then_duplicate = 0  # admitted on the master unacknowledged, then a duplicate
        self.stop = asyncio.Event()

    async def play(self, player: str, rng: random.Random) -> None:
        while not self.stop.is_set():
            guess = "".join(rng.choice(KEYBOARD) for _ in SECRET)
            job, failed, not_durable = ids.mint("JOB"), False, False
            while True:
                try:
                    done = await guesses.submit(self.game, self.round_id, player, guess, job_id=job)
                    break
                except Unavailable as exc:  # NotDurable included: the same JOB id again, as a client does
                    failed, not_durable = True, not_durable or isinstance(exc, NotDurable)
                    await asyncio.sleep(0.05)
            self.not_durable_then_duplicate += not_durable and done.outcome is Outcome.DUPLICATE
            assert done.outcome in (Outcome.ADMITTED, Outcome.DUPLICATE), done
            self.acknowledged.add(job)
            self.retried += failed
            await asyncio.sleep(0.01)


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_no_acknowledged_guess_is_lost_or_scored_twice_when_the_games_master_fails_over():
    """Every guess acknowledged durably is scored exactly once (one GES record, one scored event, one
    counted attempt), charged once in its player's ledger, and the board is the ranking recomputed from
    the records, after the game's master died mid-run and came back as a replica."""
    with RedisClusterProcesses(3, replicas=1) as cluster:
        tag = "failover"
        victim = slot_master(cluster, Keyspace(tag).ring)
        entry = next(port for port in cluster.ports if port != victim)  # a node the clients start from
        url = f"redis://127.0.0.1:{entry}/0"
        game = Game.from_url(url, tag, SETTINGS, DURABLE, cluster=True)
        try:
            the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
            joined = []
            for number in range(PLAYERS):
                player = await players.register(game, f"player {number}")
                await wallet.credit(game, player.id, "coin", 100_000, reason="test")
                joined.append(player.id)
            play = Players(game, the_round.id, joined)
            worker = Worker(
                game.bus, score_worker.ScoreWorker(game).handle, lease_ms=2_000, sweep_every_s=0.5
            )
            async with running(worker):
                tasks = [asyncio.create_task(play.play(p, random.Random(n))) for n, p in enumerate(joined)]
                await eventually(lambda: len(play.acknowledged) >= 40, 60, "guesses before the failover")
                promoted = await asyncio.to_thread(cluster.fail_over, victim)
                # The promoted master has no replica until the old one rejoins: its admissions run but
                # are not durable (NotDurable), and each player retries one guess meanwhile.
                await asyncio.to_thread(cluster.rejoin, victim)
                before = len(play.acknowledged)
                await eventually(lambda: len(play.acknowledged) >= before + 40, 60, "guesses after it")
                play.stop.set()
                await asyncio.gather(*tasks)

                async def all_scored() -> bool:
                    records = await leaderboard.scored_records(game, the_round.id)
                    return {record.job for record in records} >= play.acknowledged

                await eventually(all_scored, 60, "every acknowledged guess scored")
            assert promoted != victim
            assert play.not_durable_then_duplicate > 0  # retried after NotDurable: charged once (below)
            assert slot_master(cluster, Keyspace(tag).ring) == promoted
            with redis.Redis(port=promoted) as client:
                rows = invariants.job_rows(client, game.bus.keys)
                state = invariants.read_game(client, game.keys, the_round.id, joined)
                assert invariants.queue_structure(client, game.bus.keys, rows) == []
                problems, figures = invariants.exactly_once(state, rows, play.acknowledged)
                assert problems == []
                assert (figures["lost"], figures["double"], figures["vanished"]) == (0, 0, 0)
                assert invariants.wallets(client, game.keys, state, rows) == []
                assert invariants.leaderboard(state) == []
            records = await leaderboard.scored_records(game, the_round.id)
            assert sorted(record.job for record in records) == sorted(play.acknowledged)
            board = await leaderboard.read_board(game, the_round.id)
            assert [entry.standing for entry in board] == leaderboard.recompute(records)
            for player in joined:
                held = await wallet.read_wallet(game, player)
                charged = [entry.job for entry in held.ledger if entry.reason == "guess"]
                assert len(charged) == len(set(charged))  # each guess charged once
                assert wallet.reconcile(held) == []
        finally:
            await game.aclose()
