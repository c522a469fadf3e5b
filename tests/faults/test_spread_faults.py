"""A spread game (codemojex.spread) on a real Redis Cluster of three masters and three replicas, under
faults: players guess (retrying an unanswered call with the same job id, as a client does) while two
``codemojex worker --partitions 3`` processes score; one worker is SIGKILLed and started again, one
partition's slot moves to another master key by key and back, and the master serving another partition
is SIGKILLed, its replica promoted and the old master restarted as a replica. At the end, in every
partition: every acknowledged guess scored exactly once or dead with a reason (none lost, none doubled),
every wallet reconciled and charged once per guess, the board equal to the ranking of its records, the
queue's structure whole; and the merged board is the ranking of every partition's records.

Admissions are durable (``Settings(wait_replicas=1)``): acknowledged only once the replica holds them,
so the failover loses none of them."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys

import pytest
import redis
from redis.crc import key_slot

from codemojex import spread
from codemojex.conformance import invariants
from codemojex.errors import CodemojexError
from codemojex.game import GameSettings
from codemojex.guesses import Outcome
from codemojex.leaderboard import recompute
from codemojex.spread import SpreadGame
from echomq import Settings, ids
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import slot_owner
from tests.support.cluster import move_slot, slot_master, spread_tag
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import ROOT, eventually

DURABLE = Settings(wait_replicas=1, wait_timeout_ms=500)
RICH = GameSettings(allowance=(("ticket", 100_000),))  # enough for every guess of the run
PLAYERS = 12


def _worker(url: str, tag: str, log) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CODEMOJEX_FAULTS")}
    argv = [sys.executable, "-m", "codemojex.cli", "--redis-url", url, "--cluster", "--tag", tag]
    argv += ["worker", "--partitions", "3", "--lease-ms", "2000", "--sweep-every", "0.5"]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stderr=log)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_a_spread_game_under_worker_kills_a_reshard_and_a_failover_loses_and_doubles_nothing(tmp_path):
    with RedisClusterProcesses(3, replicas=1) as cluster:
        tag = spread_tag("sf")
        url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
        game = SpreadGame.from_url(
            url, tag=tag, partitions=3, settings=RICH, bus_settings=DURABLE, cluster=True
        )
        logs = [(tmp_path / f"worker{i}.err").open("w") for i in range(3)]
        workers = [_worker(url, tag, logs[0]), _worker(url, tag, logs[1])]
        acknowledged: dict[str, str] = {}  # JOB -> player
        faults: list[str] = []
        done = asyncio.Event()
        try:
            the_round = await spread.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
            people = [await spread.register(game, f"Faulty {i}") for i in range(PLAYERS)]

            async def play(player: str, seed: int) -> None:
                rng = random.Random(seed)
                while not done.is_set():
                    job = ids.mint("JOB")
                    guess = text(tuple(rng.choice(KEYBOARD) for _ in SECRET))
                    while True:
                        try:
                            answer = await spread.submit(game, the_round.id, player, guess, job_id=job)
                            break
                        except CodemojexError:  # unanswered, not durable yet, moved: the same id again
                            await asyncio.sleep(0.05)
                    if answer.outcome in (Outcome.ADMITTED, Outcome.DUPLICATE):
                        acknowledged[job] = player
                    await asyncio.sleep(0.1)

            async def break_things() -> None:
                await eventually(lambda: len(acknowledged) >= 20, 60, "guesses before the faults")
                workers[0].kill()  # SIGKILL mid-run, then a new one in its place
                workers[0].wait()
                workers.append(_worker(url, tag, logs[2]))
                faults.append("kill")
                moving = key_slot(game.games[1].bus.keys.ring.encode())
                home = await asyncio.to_thread(slot_owner, cluster, moving)
                away = next(port for port in cluster.ports if port != home)
                for target in (away, home):
                    await move_slot(cluster, moving, target)
                faults.append("reshard")
                victim = await asyncio.to_thread(slot_master, cluster, game.games[0].bus.keys.ring)
                await asyncio.to_thread(cluster.fail_over, victim)
                before = len(acknowledged)
                await eventually(lambda: len(acknowledged) >= before + 20, 60, "guesses after the failover")
                await asyncio.to_thread(cluster.rejoin, victim)
                faults.append("failover")
                done.set()

            await asyncio.gather(break_things(), *(play(p.id, i) for i, p in enumerate(people)))

            async def drained() -> bool:
                stats = await game.pbus.stats()
                return stats.queued + stats.active + stats.delayed == 0

            await eventually(drained, 120, "every guess scored")
        finally:
            done.set()
            for proc in workers:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in workers:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for log in logs:
                log.close()
            await game.aclose()
        assert faults == ["kill", "reshard", "failover"]
        merged = []
        for partition, one in enumerate(game.games):
            port = slot_master(cluster, one.bus.keys.ring)
            mine = {
                job for job, player in acknowledged.items() if game.partition_of_player(player) == partition
            }
            players = {p.id for p in people if game.partition_of_player(p.id) == partition}
            with redis.Redis(port=port) as client:
                rows = invariants.job_rows(client, one.bus.keys)
                state = invariants.read_game(client, one.keys, the_round.id, players)
                problems, counts = invariants.exactly_once(state, rows, mine)
                problems += invariants.wallets(client, one.keys, state, rows)
                problems += invariants.leaderboard(state)
                problems += invariants.queue_structure(client, one.bus.keys, rows)
            assert problems == [], f"partition {partition}: {problems[:10]}"
            assert counts["lost"] == counts["double"] == counts["vanished"] == 0, counts
            merged += state.records.values()
        assert {record.job for record in merged} >= {
            job for job in acknowledged if not _dead(cluster, game, job, acknowledged[job])
        }
        async with SpreadGame.from_url(url, tag=tag, partitions=3, cluster=True) as reader:
            board = await spread.read_board(reader, the_round.id, limit=PLAYERS)
        assert [entry.standing for entry in board] == recompute(merged)


def _dead(cluster: RedisClusterProcesses, game: SpreadGame, job: str, player: str) -> bool:
    bus = game.game_of(player).bus
    with redis.Redis(port=slot_master(cluster, bus.keys.ring)) as client:
        return client.zscore(bus.keys.dead, job) is not None
