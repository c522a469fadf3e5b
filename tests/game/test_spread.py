"""One game spread over partitions (codemojex.spread): a player, their name, lane, wallet and standing
in one partition; a round in every partition at the same instants; each partition's guesses scored in
its own slot; the board merged over the partitions equal to the ranking of every partition's records.
On one server (the partitions share it) and on a real three-master cluster (a partition per master)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys

import pytest
import redis
from redis.crc import key_slot

from codemojex import names, rounds, spread, wallet
from codemojex.errors import CodemojexError, InvalidInput, NameTaken, RoundClosed, UnknownRound
from codemojex.guesses import Outcome, Refusal
from codemojex.keys import guess_of
from codemojex.leaderboard import recompute
from codemojex.spread import SpreadGame
from codemojex.spread_jobs import SpreadScoreWorker
from echomq import Worker, ids
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import slot_owner
from tests.support.cluster import move_slot, slot_master, spread_tag
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import ROOT, eventually, running

FRUIT = {"keyboard": list(KEYBOARD), "secret": list(SECRET)}


@pytest.fixture
async def spread_game(redis_server, tag):
    async with SpreadGame.from_url(redis_server.url, tag=tag, partitions=3) as game:
        yield game


async def test_a_player_lives_in_the_partition_of_their_name_with_their_lane(spread_game):
    """The player's record is in the partition their name's skeleton hashes to, their lane (id) routes
    there too, and no other partition holds them."""
    for name in ["Ada", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Leslie", "Tony"]:
        player = await spread.register(spread_game, name)
        home = spread_game.partition_of_name(name)
        assert spread_game.partition_of_player(player.id) == home
        assert spread_game.pbus.route(player.id) is spread_game.games[home].bus
        held = [await game.redis.exists(game.keys.player(player.id)) for game in spread_game.games]
        assert held == [1 if i == home else 0 for i in range(3)]


async def test_a_look_alike_name_is_taken_across_the_whole_game(spread_game):
    await spread.register(spread_game, "Ada Lovelace")
    for look_alike in ["ada lovelace", "ADA  LOVELACE", "\u0391da Lovelace"]:  # a Greek Alpha
        assert names.skeleton(look_alike) == names.skeleton("Ada Lovelace")
        with pytest.raises(NameTaken):
            await spread.register(spread_game, look_alike)
    counts = [await game.redis.zcard(game.keys.players) for game in spread_game.games]
    assert sum(counts) == 1
    held = [f"Ada Lovelace {n}" for n in (2, 3, 4, 5)]  # the first suggestions, held in their partitions
    assert {spread_game.partition_of_name(name) for name in held} != {
        spread_game.partition_of_name("Ada Lovelace")
    }
    for name in held:
        await spread.register(spread_game, name)
    with pytest.raises(NameTaken) as taken:
        await spread.register(spread_game, "ada lovelace")
    suggestion = taken.value.suggestion
    assert suggestion not in held
    assert suggestion is not None
    assert (await spread.register(spread_game, suggestion)).name == suggestion  # free in its own partition


async def test_a_round_opens_in_every_partition_at_the_same_instants(spread_game):
    the_round = await spread.open_round(spread_game, **FRUIT, duration_s=60)
    for game in spread_game.games:
        there = await rounds.get_round(game, the_round.id)
        assert (there.opens_ms, there.closes_ms, there.keyboard, there.prices) == (
            the_round.opens_ms,
            the_round.closes_ms,
            the_round.keyboard,
            the_round.prices,
        )
        assert await rounds.read_secret(game, the_round.id) == SECRET


async def test_an_opening_cut_off_midway_is_mended_by_opening_again_with_its_arguments(spread_game):
    """The first partition opened (the others never reached): their players' guesses are refused as an
    unknown round, nothing charged; opening again with the same id, secret and instant writes the rest and
    leaves the first as it was."""
    round_id, opens_at = ids.mint("RND"), await rounds.server_ms(spread_game.games[0])
    first = await rounds.open_round(
        spread_game.games[0],
        keyboard=list(KEYBOARD),
        secret=list(SECRET),
        round_id=round_id,
        opens_at_ms=opens_at,
    )
    player = await _player_in(spread_game, 2)
    with pytest.raises(UnknownRound):
        await spread.submit(spread_game, round_id, player.id, text(SECRET))
    assert (await wallet.read_wallet(spread_game.game_of(player.id), player.id)).ledger == ()
    again = await spread.open_round(spread_game, **FRUIT, round_id=round_id, opens_at_ms=opens_at)
    assert (again.opens_ms, again.created_ms) == (first.opens_ms, first.created_ms)
    admitted = await spread.submit(spread_game, round_id, player.id, text(SECRET))
    assert admitted.outcome is Outcome.ADMITTED


async def test_every_partition_closes_at_the_rounds_close_instant(spread_game):
    """Guesses are taken in every partition until the close instant and refused in every one after it,
    each partition judging by its own server clock."""
    the_round = await spread.open_round(spread_game, **FRUIT, duration_s=2)
    people = [await _player_in(spread_game, i) for i in range(3)]
    before = [await spread.submit(spread_game, the_round.id, p.id, text(SECRET[::-1])) for p in people]
    assert [s.outcome for s in before] == [Outcome.ADMITTED] * 3
    assert the_round.closes_ms is not None
    closes = the_round.closes_ms

    async def past_close() -> bool:
        return all([await rounds.server_ms(game) > closes for game in spread_game.games])

    await eventually(past_close, timeout=30, what="the close instant on every server")
    after = [await spread.submit(spread_game, the_round.id, p.id, text(SECRET)) for p in people]
    assert [s.refusal for s in after] == [Refusal.ROUND_CLOSED] * 3


async def test_a_round_closed_early_is_closed_in_every_partition_under_one_operation(spread_game):
    """The operator's early close reaches every partition: every player's guess is refused after it; the
    same operation again answers the same time (a lost reply's retry), another one is RoundClosed."""
    the_round = await spread.open_round(spread_game, **FRUIT)
    people = [await _player_in(spread_game, i) for i in range(3)]
    operation = ids.mint("OPR")
    closed = await spread.close_round(spread_game, the_round.id, operation=operation)
    assert await spread.close_round(spread_game, the_round.id, operation=operation) == closed
    with pytest.raises(RoundClosed):
        await spread.close_round(spread_game, the_round.id)
    after = [await spread.submit(spread_game, the_round.id, p.id, text(SECRET)) for p in people]
    assert [s.refusal for s in after] == [Refusal.ROUND_CLOSED] * 3
    for game in spread_game.games:
        assert (await rounds.get_round(game, the_round.id)).closed_ms is not None


async def _player_in(spread_game: SpreadGame, partition: int):
    for i in range(10_000):
        name = f"Player {i}"
        if spread_game.partition_of_name(name) == partition:
            return await spread.register(spread_game, name)
    raise AssertionError("no name hashes there")


async def _play(spread_game: SpreadGame, players: int, seed: int) -> tuple[str, list[str]]:
    """Open a round, register ``players`` players and admit each a few guesses (one solving, one sent
    twice under one job id); the round and the admitted job ids."""
    rng = random.Random(seed)
    the_round = await spread.open_round(spread_game, **FRUIT)
    people = [await spread.register(spread_game, f"Spread {seed} {i}") for i in range(players)]
    admitted: list[str] = []
    for person in people:
        for n in range(rng.randint(1, 4)):
            guess = SECRET if n == 2 and rng.random() < 0.5 else tuple(rng.choice(KEYBOARD) for _ in SECRET)
            done = await spread.submit(spread_game, the_round.id, person.id, text(guess))
            if done.outcome is Outcome.ADMITTED:
                admitted.append(done.job)
                again = await spread.submit(
                    spread_game, the_round.id, person.id, text(guess), job_id=done.job
                )
                assert again.outcome is Outcome.DUPLICATE
    return the_round.id, admitted


async def _score_all(spread_game: SpreadGame, admitted: list[str], workers: int = 2) -> None:
    handlers = [SpreadScoreWorker(spread_game) for _ in range(workers)]
    pool = [Worker(spread_game.pbus, h.handle, concurrency=4, sweep_every_s=0.5) for h in handlers]
    async with contextlib.AsyncExitStack() as stack:
        for worker in pool:
            await stack.enter_async_context(running(worker))
        await eventually(
            lambda: sum(w.processed for w in pool) >= len(admitted), timeout=60, what="every guess scored"
        )


async def test_the_merged_board_is_the_ranking_of_every_partitions_records(spread_game):
    round_id, admitted = await _play(spread_game, players=15, seed=1)
    await _score_all(spread_game, admitted)
    records = await spread.scored_records(spread_game, round_id)
    assert sorted(r.id for r in records) == sorted(guess_of(job) for job in admitted)
    board = await spread.read_board(spread_game, round_id, limit=100)
    assert [entry.standing for entry in board] == recompute(records)
    assert [entry.rank for entry in board] == list(range(1, len(board) + 1))
    assert len({spread_game.partition_of_player(e.standing.player) for e in board}) == 3
    top = await spread.read_board(spread_game, round_id, limit=4)
    assert top == board[:4]


# --- on a real cluster: a partition per master -------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    with RedisClusterProcesses(3) as nodes:
        yield nodes


@pytest.mark.slow
async def test_on_a_cluster_each_partition_is_played_on_its_own_master(cluster):
    """The round is written to each master; every guess is charged, admitted and scored on its player's
    master, and the merged board is the ranking of all the records."""
    tag = spread_tag("sg")
    url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
    async with SpreadGame.from_url(url, tag=tag, partitions=3, cluster=True) as spread_game:
        round_id, admitted = await _play(spread_game, players=12, seed=2)
        await _score_all(spread_game, admitted)
        records = await spread.scored_records(spread_game, round_id)
        assert sorted(r.id for r in records) == sorted(guess_of(job) for job in admitted)
        board = await spread.read_board(spread_game, round_id)
        assert [entry.standing for entry in board] == recompute(records)
        homes = set()
        for game in spread_game.games:
            port = await asyncio.to_thread(slot_master, cluster, game.keys.round(round_id))
            homes.add(port)
            with redis.Redis(port=port) as node:
                assert node.exists(game.keys.round(round_id), game.bus.keys.ring) >= 1
        assert len(homes) == 3


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_a_partitions_slot_moved_to_another_master_and_back_mid_round_loses_and_doubles_nothing(
    cluster,
):
    """Players guess (retrying a refused call with the same job id, as a client does) and two workers score
    while one partition's slot, its players' wallets, lanes, records and board with it, moves to another
    master key by key and back. Every admitted guess is scored exactly once, every wallet reconciles with
    its ledger, and the merged board is the ranking of every record."""
    tag = spread_tag("sg")
    url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
    async with SpreadGame.from_url(url, tag=tag, partitions=3, cluster=True) as spread_game:
        the_round = await spread.open_round(spread_game, **FRUIT)
        people = [await spread.register(spread_game, f"Mover {i}") for i in range(9)]
        admitted: list[str] = []
        owners: dict[str, str] = {}
        moving = spread_game.games[1]
        assert any(spread_game.game_of(p.id) is moving for p in people)
        slot = key_slot(moving.bus.keys.ring.encode())
        moves = 0

        async def play(player_id: str, seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(12):
                job, guess = ids.mint("JOB"), tuple(rng.choice(KEYBOARD) for _ in SECRET)
                while True:
                    try:
                        done = await spread.submit(
                            spread_game, the_round.id, player_id, text(guess), job_id=job
                        )
                        break
                    except CodemojexError:  # a key mid-move (TRYAGAIN, ASK) or a moved slot: again
                        await asyncio.sleep(0.02)
                if done.outcome in (Outcome.ADMITTED, Outcome.DUPLICATE):  # a retry of a landed call
                    admitted.append(job)
                    owners[job] = player_id
                await asyncio.sleep(0.03)

        async def reshard() -> None:
            nonlocal moves
            home = await asyncio.to_thread(slot_owner, cluster, slot)
            away = next(port for port in cluster.ports if port != home)
            for target in (away, home):
                moves += await move_slot(cluster, slot, target) > 0
                await asyncio.sleep(0.3)

        handlers = [SpreadScoreWorker(spread_game) for _ in range(2)]
        pool = [Worker(spread_game.pbus, h.handle, concurrency=4, sweep_every_s=0.5) for h in handlers]
        async with contextlib.AsyncExitStack() as stack:
            for worker in pool:
                await stack.enter_async_context(running(worker))
            mover = asyncio.create_task(reshard())
            await asyncio.gather(*(play(p.id, i) for i, p in enumerate(people)))
            await mover

            async def all_scored() -> bool:
                return len(await spread.scored_records(spread_game, the_round.id)) >= len(admitted)

            await eventually(all_scored, timeout=60, what="every guess scored")
        assert moves == 2
        records = await spread.scored_records(spread_game, the_round.id)
        assert sorted(r.id for r in records) == sorted(guess_of(job) for job in admitted)
        assert [entry.standing for entry in await spread.read_board(spread_game, the_round.id)] == recompute(
            records
        )
        for person in people:
            held = await wallet.read_wallet(spread_game.game_of(person.id), person.id)
            assert wallet.reconcile(held) == []
            charged = [entry.job for entry in held.ledger if entry.reason == "guess"]
            assert sorted(charged) == sorted(job for job in admitted if owners[job] == person.id)


async def test_the_worker_command_scores_a_spread_game_and_refunds_a_dead_guess_in_its_partition(
    spread_game, redis_server, tmp_path
):
    """``codemojex worker --partitions 3``: every player's guess scored in its partition, a guess that
    can only die (its job's payload unreadable) dead-lettered in its partition, and a clean stop."""
    round_id, admitted = await _play(spread_game, players=6, seed=3)
    victim = await _player_in(spread_game, 1)
    bad = ids.mint("JOB")
    await spread_game.pbus.enqueue(bad, lane=victim.id, payload=b"not a guess", max_attempts=1)
    log = tmp_path / "worker.err"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    argv = [
        sys.executable,
        "-m",
        "codemojex.cli",
        "--redis-url",
        redis_server.url,
        "--tag",
        spread_game.pbus.tag,
    ]
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*argv, "worker", "--partitions", "3", "--sweep-every", "1"], cwd=ROOT, env=env, stderr=err
        )
        try:
            records = []

            async def scored() -> bool:
                nonlocal records
                records = await spread.scored_records(spread_game, round_id)
                return len(records) == len(admitted)

            await eventually(scored, 60, "every guess scored by the worker command")
            home = spread_game.games[1].bus
            await eventually(lambda: _state(home, bad, "dead"), 30, "the unreadable guess dead")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()
    assert [entry.standing for entry in await spread.read_board(spread_game, round_id)] == recompute(records)


async def _state(bus, job: str, state: str) -> bool:
    return (await bus.inspect(job)).state.value == state


async def test_a_game_opened_with_another_partition_count_is_refused(spread_game, redis_server):
    """Each partition keeps its place i/P: the same tag opened with another P is refused before any
    write (a player's partition is a function of P)."""
    await spread.register(spread_game, "First")
    async with SpreadGame.from_url(redis_server.url, tag=spread_game.pbus.tag, partitions=2) as other:
        with pytest.raises(CodemojexError):
            await spread.register(other, "Second")
    counts = [await game.redis.zcard(game.keys.players) for game in spread_game.games]
    assert sum(counts) == 1


# --- mending a partial opening, and the reveal (found by the adversary pass, failing first) ----------


async def test_a_mend_without_the_rounds_duration_is_refused_and_one_with_it_closes_everywhere_at_once(
    spread_game,
):
    """open_round.lua compares the duration (and the opening instant) too: a mend that leaves the duration
    out is refused, nothing written; the mend with the first call's arguments closes every partition at
    the round's instant, so no guess is admitted after it anywhere."""
    round_id, opens_at = ids.mint("RND"), await rounds.server_ms(spread_game.games[0])
    first = await rounds.open_round(
        spread_game.games[0], **FRUIT, duration_s=2, round_id=round_id, opens_at_ms=opens_at
    )
    with pytest.raises(InvalidInput):
        await spread.open_round(spread_game, **FRUIT, round_id=round_id, opens_at_ms=opens_at)
    assert [await g.redis.exists(g.keys.round(round_id)) for g in spread_game.games] == [1, 0, 0]
    await spread.open_round(spread_game, **FRUIT, duration_s=2, round_id=round_id, opens_at_ms=opens_at)
    assert {(await rounds.get_round(g, round_id)).closes_ms for g in spread_game.games} == {first.closes_ms}
    late = await _player_in(spread_game, 2)
    closes = first.closes_ms
    assert closes is not None

    async def past_close() -> bool:
        return all([await rounds.server_ms(game) > closes for game in spread_game.games])

    await eventually(past_close, timeout=30, what="the round's close instant")
    after = await spread.submit(spread_game, round_id, late.id, text(SECRET))
    assert after.refusal is Refusal.ROUND_CLOSED


async def test_a_round_closed_before_its_opening_was_mended_stays_closed_everywhere(spread_game):
    round_id, opens_at = ids.mint("RND"), await rounds.server_ms(spread_game.games[0])
    for game in spread_game.games[:2]:
        await rounds.open_round(game, **FRUIT, duration_s=600, round_id=round_id, opens_at_ms=opens_at)
    assert await spread.close_round(spread_game, round_id) > 0  # the home holds it: closed, not a 404
    shown = [(await rounds.read_revealed(g, [round_id]))[0] for g in spread_game.games]
    assert shown == [None] * 3  # partition 2 may still be written open: nothing shows yet
    await spread.open_round(spread_game, **FRUIT, duration_s=600, round_id=round_id, opens_at_ms=opens_at)
    late = await _player_in(spread_game, 2)
    after = await spread.submit(spread_game, round_id, late.id, text(SECRET))
    assert after.refusal is Refusal.ROUND_CLOSED


async def test_no_partition_reveals_the_secret_while_another_still_takes_guesses(spread_game):
    """A close that reached two partitions of three (the third's call failed) reveals nothing; the
    reveal pass waits for the round to be closed everywhere, then shows it in every partition."""
    the_round = await spread.open_round(spread_game, **FRUIT)
    operation = ids.mint("OPR")
    for game in spread_game.games[:2]:  # what spread.close_round leaves when partition 2's call fails
        await rounds.close_round(game, the_round.id, operation=operation, reveal=False)
    assert await spread.reveal_closed(spread_game) == []
    assert [(await rounds.read_revealed(g, [the_round.id]))[0] for g in spread_game.games] == [None] * 3
    await spread.close_round(spread_game, the_round.id, operation=operation)  # the operator's retry
    shown = [(await rounds.read_revealed(g, [the_round.id]))[0] for g in spread_game.games]
    assert shown == [SECRET] * 3


async def test_a_refused_mend_writes_no_partition(spread_game):
    """The partitions holding the round answer a mend first: one with other settings refuses it before
    any other partition is written."""
    round_id, opens_at = ids.mint("RND"), await rounds.server_ms(spread_game.games[0])
    await rounds.open_round(spread_game.games[0], **FRUIT, round_id=round_id, opens_at_ms=opens_at)
    with pytest.raises(CodemojexError):
        await spread.open_round(
            spread_game, **FRUIT, prices=[("coin", 7)], round_id=round_id, opens_at_ms=opens_at
        )
    assert [await g.redis.exists(g.keys.round(round_id)) for g in spread_game.games] == [1, 0, 0]


async def test_one_token_names_one_player_across_the_whole_game(spread_game):
    """A token is minted for a name's partition (spread.new_token), where its key lives: the same token
    for a name of another partition is refused, nothing registered (found by the adversary pass: one
    token named two players, one per partition)."""
    names = {spread_game.partition_of_name(f"Holder {i}"): f"Holder {i}" for i in range(50)}
    first, second = names[0], names[1]
    token = spread.new_token(spread_game, first)
    await spread.register(spread_game, first, token=token)
    with pytest.raises(InvalidInput):
        await spread.register(spread_game, second, token=token)
    same = next(f"Other {i}" for i in range(50) if spread_game.partition_of_name(f"Other {i}") == 0)
    with pytest.raises(InvalidInput):  # the same partition: register.lua's own refusal
        await spread.register(spread_game, same, token=token)
    counts = [await game.redis.zcard(game.keys.players) for game in spread_game.games]
    assert sum(counts) == 1
