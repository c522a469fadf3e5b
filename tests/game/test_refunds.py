"""A guess that can never be scored gives the player their payment back, once: dead-lettered guesses are
refunded once (ledger reason ``refund`` naming the JOB), however many refund runs race; a refunded guess
that is retried and scored pays again (``recharge``) or is completed unscored (``unpaid``), never both
refunded and scored for free; every wallet reconciles.

Real Redis throughout; the score worker is a real ``codemojex worker`` process where the point is what
the worker does on its own (its dead-letter hook, its periodic pass over the dead set).
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys

import pytest

from codemojex import guesses, players, refunds, rounds, wallet
from codemojex.conformance import invariants
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from codemojex.payload import decode_payload
from codemojex.refunds import Refund, Refunder
from codemojex.score_worker import ScoreWorker, score_call
from echomq import Bus, Worker, rows
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.probe import set_payload
from tests.support.web import ROOT, stop_worker, worker_process
from tests.support.workers import eventually, running

COIN_GAME = GameSettings(
    grant=(("coin", 100),), allowance=(), solve_reward=(), prices=(("coin", 5),), max_attempts=1
)
GUESS = ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑")


@pytest.fixture
async def coin_game(redis_server, tag):
    """A game where a guess costs 5 coins of a grant of 100, and a job has one try (dies on its first)."""
    the_game = Game(Bus.from_url(redis_server.url, tag=tag), COIN_GAME)
    yield the_game
    await the_game.aclose()


@pytest.fixture
async def setup(coin_game):
    the_round = await rounds.open_round(coin_game, keyboard=list(KEYBOARD), secret=list(SECRET))
    player = await players.register(coin_game, "Ada")
    return coin_game, the_round, player


def ledger_of(sync_redis, game, player_id, job=None):
    entries = [json.loads(raw) for raw in sync_redis.lrange(game.keys.ledger(player_id), 0, -1)]
    return [e for e in entries if job is None or e["job"] == job]


def net_charge(entries) -> int:
    return -sum(entry["delta"] for entry in entries)


async def reconciles(game, player_id) -> bool:
    return wallet.reconcile(await wallet.read_wallet(game, player_id)) == []


async def submit(game, the_round, player, guess=GUESS) -> str:
    admitted = await guesses.submit(game, the_round.id, player.id, text(guess))
    assert admitted.outcome is Outcome.ADMITTED
    return admitted.job


async def die_on_lease(game: Game, count: int) -> list[str]:
    """Claim ``count`` jobs as a worker that then dies (never finishes), let their one-try leases lapse and
    sweep: each is dead-lettered ('lease expired on the last of 1 attempts')."""
    claims = await game.bus.claim(count, lease_ms=100)
    assert len(claims) == count
    await asyncio.sleep(0.2)
    report = await game.bus.sweep()
    assert report.dead == count
    return [claim.job for claim in claims]


async def test_a_bad_payload_is_dead_lettered_and_refunded_once_by_the_worker(
    setup, redis_server, tag, sync_redis
):
    """A real score worker dead-letters a guess whose payload it cannot read and refunds it, once."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    row = game.bus.keys.job(job)
    payload = json.loads(rows.payload_of(sync_redis.hgetall(row)))
    payload["v"] = 99  # a payload of a version this worker does not read: Permanent, dead at once
    set_payload(sync_redis, row, json.dumps(payload).encode())
    process = worker_process(redis_server.url, tag)
    try:
        await eventually(lambda: len(ledger_of(sync_redis, game, player.id, job)) == 2, what="the refund")
    finally:
        stop_worker(process)
    assert sync_redis.hget(row, rows.STATE) == b"dead"
    entries = ledger_of(sync_redis, game, player.id, job)
    assert [(e["reason"], e["currency"], e["delta"]) for e in entries] == [
        ("guess", "coin", -5),
        ("refund", "coin", 5),
    ]
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 100}
    assert await refunds.refund(game, [job]) == [refunds.RefundResult(job, Refund.ALREADY)]
    assert len(ledger_of(sync_redis, game, player.id, job)) == 2
    assert await reconciles(game, player.id)


async def test_the_workers_dead_letter_hook_refunds_at_once(setup, sync_redis):
    """A Worker given Refunder.on_dead (and no pass over the dead set) refunds the guess its fail
    dead-lettered."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    row = game.bus.keys.job(job)
    set_payload(sync_redis, row, b"\xff not even JSON")  # no round to read: the ledger names it
    async with running(Worker(game.bus, ScoreWorker(game).handle, on_dead=Refunder(game).on_dead)):
        await eventually(lambda: len(ledger_of(sync_redis, game, player.id, job)) == 2, what="the refund")
    assert sync_redis.hget(row, rows.STATE) == b"dead"
    assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == ["guess", "refund"]


async def test_a_lease_expired_on_its_last_try_is_refunded_by_the_workers_pass(
    setup, redis_server, tag, sync_redis
):
    """A guess whose claimant died on its only try is dead-lettered by a real worker's sweep and refunded
    by its periodic pass over the dead set."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    [claim] = await game.bus.claim(1, lease_ms=300)  # a claimant that dies: it never finishes
    assert claim.job == job
    process = worker_process(redis_server.url, tag)  # sweeps and passes over the dead set every 0.3 s
    try:
        await eventually(lambda: len(ledger_of(sync_redis, game, player.id, job)) == 2, what="the refund")
    finally:
        stop_worker(process)
    assert b"lease expired" in sync_redis.hget(game.bus.keys.job(job), rows.ERROR)
    assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == ["guess", "refund"]
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 100}
    assert await reconciles(game, player.id)


async def test_racing_refund_runs_refund_each_dead_guess_once(setup, redis_server, tag, sync_redis):
    """Concurrent passes (on their own connections) and concurrent `codemojex refund` processes: each
    dead guess is refunded exactly once."""
    game, the_round, player = setup
    jobs = [await submit(game, the_round, player) for _ in range(8)]
    assert sorted(await die_on_lease(game, 8)) == sorted(jobs)
    others = [Game(Bus.from_url(redis_server.url, tag=tag), COIN_GAME) for _ in range(4)]
    argv = [sys.executable, "-m", "codemojex.cli", "--redis-url", redis_server.url, "--tag", tag, "refund"]
    processes = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL) for _ in range(3)]
    try:
        passes = await asyncio.gather(
            *(refunds.refund_dead(other, since_ms=0) for other in others),
            *(refunds.refund(other, jobs) for other in others),
        )
    finally:
        for other in others:
            await other.aclose()
        assert [p.wait(60) for p in processes] == [0, 0, 0]
    refunded_by_passes = [job for done in passes[:4] for job in done.refunded]
    refunded_by_calls = [r.job for results in passes[4:] for r in results if r.outcome is Refund.REFUNDED]
    assert len(refunded_by_passes) + len(refunded_by_calls) <= len(jobs)
    for job in jobs:
        assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == ["guess", "refund"], job
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 100}
    assert await reconciles(game, player.id)


async def test_a_refunded_guess_retried_and_scored_is_recharged(setup, sync_redis):
    """Dead, refunded, retried by the operator and then scored: charged again (recharge, JOB named)."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    await die_on_lease(game, 1)
    assert (await refunds.refund(game, [job]))[0].outcome is Refund.REFUNDED
    assert await game.bus.retry_dead(job)
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(lambda: sync_redis.exists(game.keys.guess(guess_of(job))), what="the score")
    entries = ledger_of(sync_redis, game, player.id, job)
    assert [(e["reason"], e["delta"]) for e in entries] == [("guess", -5), ("refund", 5), ("recharge", -5)]
    assert sync_redis.hget(game.keys.refunds(the_round.id), job) == b"recharged"
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 95}
    assert await refunds.refund(game, [job]) == [refunds.RefundResult(job, Refund.NOT_DEAD)]  # done now
    assert len(ledger_of(sync_redis, game, player.id, job)) == 3
    assert await reconciles(game, player.id)


async def test_a_refunded_guess_the_wallet_cannot_pay_again_is_completed_unscored(setup, sync_redis):
    """Refunded, the coins spent meanwhile, then retried: completed without a record ('unpaid'), net 0."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    await die_on_lease(game, 1)
    assert (await refunds.refund(game, [job]))[0].outcome is Refund.REFUNDED
    spent = [await submit(game, the_round, player) for _ in range(20)]  # 100 coins: every coin spent
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 0}
    assert await game.bus.retry_dead(job)
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(
            lambda: sync_redis.hget(game.bus.keys.job(job), rows.STATE) == b"done", what="the finish"
        )
        await eventually(
            lambda: all(sync_redis.exists(game.keys.guess(guess_of(other))) for other in spent),
            what="the rest",
        )
    assert sync_redis.hget(game.bus.keys.job(job), rows.RESULT) == b"unpaid"
    assert not sync_redis.exists(game.keys.guess(guess_of(job)))
    assert sync_redis.hget(game.keys.refunds(the_round.id), job) == b"unpaid"
    assert net_charge(ledger_of(sync_redis, game, player.id, job)) == 0
    assert await reconciles(game, player.id)
    assert conformance_problems(sync_redis, game, the_round, player) == []  # unpaid is not lost


async def test_refund_racing_retry_dead_never_leaves_a_guess_scored_for_free(
    setup, redis_server, tag, sync_redis
):
    """Refunds and retries of the same dead guesses, in both orders and racing on their own connections:
    after scoring, every scored guess is charged its price once in net, every unscored one nothing."""
    game, the_round, player = setup
    jobs = [await submit(game, the_round, player) for _ in range(18)]
    await die_on_lease(game, 18)
    refund_first, retry_first, racing = jobs[:6], jobs[6:12], jobs[12:]
    refunder, retrier = (Game(Bus.from_url(redis_server.url, tag=tag), COIN_GAME) for _ in range(2))

    async def jittered(call):
        await asyncio.sleep(random.uniform(0, 0.005))
        return await call

    try:
        for job in refund_first:  # the refund lands first: the retried guess must pay again
            assert (await refunds.refund(refunder, [job]))[0].outcome is Refund.REFUNDED
            assert await retrier.bus.retry_dead(job)
        for job in retry_first:  # the retry lands first: no refund (the job is not dead any more)
            assert await retrier.bus.retry_dead(job)
            assert (await refunds.refund(refunder, [job]))[0].outcome is Refund.NOT_DEAD
        outcomes = await asyncio.gather(
            *(jittered(refunds.refund(refunder, [job])) for job in racing),
            *(jittered(retrier.bus.retry_dead(job)) for job in racing),
            refunds.refund_dead(refunder, since_ms=0),
        )
    finally:
        await refunder.aclose()
        await retrier.aclose()
    assert all(outcomes[len(racing) : 2 * len(racing)])  # each racing job was retried, refunded first or not
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(
            lambda: all(sync_redis.hget(game.bus.keys.job(job), rows.STATE) == b"done" for job in jobs),
            what="every retried guess finishing",
        )
    for job in jobs:
        entries = ledger_of(sync_redis, game, player.id, job)
        scored = bool(sync_redis.exists(game.keys.guess(guess_of(job))))
        assert net_charge(entries) == (5 if scored else 0), (job, entries)
        assert [e["reason"] for e in entries].count("refund") <= 1
    for job in refund_first:
        assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == [
            "guess",
            "refund",
            "recharge",
        ]
    assert await reconciles(game, player.id)
    assert conformance_problems(sync_redis, game, the_round, player) == []


def conformance_problems(sync_redis, game, the_round, player) -> list[str]:
    """What the conformance suite's exactly-once and wallet checks find in this game's state."""
    rows = invariants.job_rows(sync_redis, game.bus.keys)
    state = invariants.read_game(sync_redis, game.keys, the_round.id, [player.id])
    once, _ = invariants.exactly_once(state, rows, set())
    return once + invariants.wallets(sync_redis, game.keys, state, rows)


async def test_the_conformance_checks_hold_for_refunds_and_catch_a_second_one(setup, sync_redis):
    """Refunded (dead) and recharged (scored) guesses pass the checks; a second refund entry for a job,
    or a refund whose marker is gone, is reported."""
    game, the_round, player = setup
    dead, recharged = await submit(game, the_round, player), await submit(game, the_round, player)
    await die_on_lease(game, 2)
    assert [r.outcome for r in await refunds.refund(game, [dead, recharged])] == [Refund.REFUNDED] * 2
    assert await game.bus.retry_dead(recharged)
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(lambda: sync_redis.exists(game.keys.guess(guess_of(recharged))), what="the score")
    assert conformance_problems(sync_redis, game, the_round, player) == []
    [refund_entry] = [e for e in ledger_of(sync_redis, game, player.id, dead) if e["reason"] == "refund"]
    balance = int(sync_redis.hincrby(game.keys.wallet(player.id), "coin", 5))  # a second refund, by hand
    sync_redis.rpush(game.keys.ledger(player.id), json.dumps(refund_entry | {"balance": balance}))
    sync_redis.hdel(game.keys.refunds(the_round.id), recharged)  # as if the recharge never happened
    problems = conformance_problems(sync_redis, game, the_round, player)
    assert any(f"{dead} was refunded 2" in problem for problem in problems), problems
    assert any(f"{recharged} was refunded without its marker" in problem for problem in problems), problems


async def test_a_scored_or_live_guess_is_never_refunded(setup, sync_redis):
    """Queued, then scored: refund answers not_dead and credits nothing."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    assert await refunds.refund(game, [job]) == [refunds.RefundResult(job, Refund.NOT_DEAD)]
    async with running(Worker(game.bus, ScoreWorker(game).handle)):
        await eventually(
            lambda: sync_redis.hget(game.bus.keys.job(job), rows.STATE) == b"done", what="the score"
        )
    assert await refunds.refund(game, [job]) == [refunds.RefundResult(job, Refund.NOT_DEAD)]
    assert (await refunds.refund_dead(game, since_ms=0)).refunded == ()
    assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == ["guess"]


async def test_a_scored_guess_dead_lettered_by_the_sweep_is_finished_not_refunded(setup, sync_redis):
    """Effect written, worker dead on its last try, sweep dead-letters it: the refund pass finishes it
    (dead -> done), refunds nothing, and exactly-once holds."""
    game, the_round, player = setup
    job = await submit(game, the_round, player)
    [claim] = await game.bus.claim(1, lease_ms=100)  # the only try
    request = decode_payload(rows.payload_of(sync_redis.hgetall(game.bus.keys.job(job))))
    call = score_call(game, claim, request, score(SECRET, GUESS), finish=False)
    assert [int(part) for part in await game.run("score", *call)] == [2, 1]  # the effect, no ack
    await asyncio.sleep(0.2)
    assert (await game.bus.sweep()).dead == 1  # 'lease expired on the last of 1 attempts'
    assert sync_redis.hget(game.bus.keys.job(job), rows.STATE) == b"dead"
    done = await refunds.refund_dead(game, since_ms=0)
    assert done.refunded == ()
    assert sync_redis.hget(game.bus.keys.job(job), rows.STATE) == b"done"
    assert sync_redis.zscore(game.bus.keys.dead, job) is None
    assert sync_redis.zscore(game.bus.keys.done, job) is not None
    assert [e["reason"] for e in ledger_of(sync_redis, game, player.id, job)] == ["guess"]
    assert await refunds.refund(game, [job]) == [refunds.RefundResult(job, Refund.NOT_DEAD)]
    assert conformance_problems(sync_redis, game, the_round, player) == []
    assert await reconciles(game, player.id)
