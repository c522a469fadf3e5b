"""A score worker process killed with SIGKILL after writing the effect and before acknowledging: the
job is redelivered, re-run, and the guess is still scored once.

The kill is real: the fault point ``score.after_effect`` (armed by ``CODEMOJEX_FAULTS`` in this test
only) makes the worker write the GES record and its counts without completing the job, then SIGKILL
itself. A second worker process reclaims the job after its lease and runs it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from codemojex import guesses, players, rounds, wallet
from codemojex.faults import ENV
from codemojex.keys import guess_of
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import ROOT, eventually, stop_process


def score_worker_process(url: str, tag: str, *, faults: str = "") -> subprocess.Popen[str]:
    """``codemojex worker`` as its own process, with a short lease and sweep so a crash heals fast."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONUNBUFFERED"] = "1"
    if faults:
        env[ENV] = faults
    return subprocess.Popen(
        [sys.executable, "-m", "codemojex.cli", "--redis-url", url, "--tag", tag,
         "worker", "--concurrency", "4", "--lease-ms", "1000", "--sweep-every", "0.3"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def crashed(proc: subprocess.Popen[str]) -> int:
    """Wait for a worker armed to crash to die; its exit code (always reaped)."""
    try:
        return proc.wait(60)
    finally:
        stop_process(proc)


def stopped(proc: subprocess.Popen[str]) -> int:
    """Stop a worker with SIGTERM (a graceful shutdown) and return its exit code (always reaped)."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)  # a stopped process takes its SIGTERM once it runs
        return proc.wait(30)
    finally:
        stop_process(proc)


@pytest.mark.slow
async def test_killed_after_the_effect_before_the_ack_the_guess_is_scored_once(
    redis_server, tag, game, the_round, player, game_probe
):
    """SIGKILL between effect and ack: one record, one counted attempt, done on the second delivery."""
    submitted = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    first = score_worker_process(redis_server.url, tag, faults="score.after_effect")
    assert crashed(first) == -signal.SIGKILL

    # The effect landed, the acknowledgement never did: the job is still active under its first claim.
    info = await game.bus.inspect(submitted.job)
    assert (info.state.value, info.attempts) == ("active", 1)
    assert game_probe.records(the_round.id) == [guess_of(submitted.job)]
    assert game_probe.standing(the_round.id, player.id).attempts == 1

    second = score_worker_process(redis_server.url, tag)
    try:

        async def done() -> bool:
            return (await game.bus.inspect(submitted.job)).state.value == "done"

        await eventually(done, 60, "the redelivered job completed")
    finally:
        assert stopped(second) == 0

    info = await game.bus.inspect(submitted.job)
    assert info.attempts == 2  # delivered twice
    assert game_probe.records(the_round.id) == [guess_of(submitted.job)]  # scored once
    standing = game_probe.standing(the_round.id, player.id)
    assert (standing.solved, standing.attempts) == (True, 1)
    assert len(game_probe.events(the_round.id)) == 1
    counters = game_probe.bus.counters()
    assert (counters["completed"], counters["reclaimed"]) == (1, 1)


@pytest.mark.slow
async def test_a_crash_mid_stream_loses_no_guess_and_scores_none_twice(redis_server, tag, game, game_probe):
    """Forty guesses of eight players; the first worker dies after its first effect; all are scored once."""
    the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
    field = [await players.register(game, f"p{n}") for n in range(8)]
    admitted = []
    for n in range(40):
        guess = [KEYBOARD[(n + i) % len(KEYBOARD)] for i in range(6)]
        submission = await guesses.submit(game, the_round.id, field[n % 8].id, guess)
        if submission.outcome.value == "admitted":
            admitted.append(submission.job)
    assert len(admitted) == 40  # 5 guesses each: 3 tickets + 2 x 5 coins

    first = score_worker_process(redis_server.url, tag, faults="score.after_effect")
    assert crashed(first) == -signal.SIGKILL
    second = score_worker_process(redis_server.url, tag)
    try:
        await eventually(lambda: len(game_probe.records(the_round.id)) == 40, 60, "all 40 scored")

        async def all_done() -> bool:
            return all([(await game.bus.inspect(job)).state.value == "done" for job in admitted])

        await eventually(all_done, 60, "all 40 jobs done")
    finally:
        assert stopped(second) == 0

    assert sorted(game_probe.records(the_round.id)) == sorted(guess_of(job) for job in admitted)
    debits = []
    for member in field:
        assert game_probe.standing(the_round.id, member.id).attempts == 5  # distinct keys never solve
        assert wallet.reconcile(await wallet.read_wallet(game, member.id)) == []
        debits += game_probe.ledger_jobs(member.id)
    assert sorted(debits) == sorted(admitted)  # each admitted guess charged exactly once
    assert game_probe.bus.counters()["completed"] == 40


@pytest.mark.slow
async def test_a_stalled_worker_resumed_after_its_lease_was_reclaimed_is_stale_and_counts_nothing(
    redis_server, tag, game, the_round, player, game_probe
):
    """SIGSTOP mid-job past the lease, another worker scores it, SIGCONT: the old run is refused."""
    submitted = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    stalled = score_worker_process(redis_server.url, tag, faults="score.before_effect")
    try:
        await eventually(lambda: psutil.Process(stalled.pid).status() == psutil.STATUS_STOPPED, 60, "stalled")
        second = score_worker_process(redis_server.url, tag)
        try:

            async def done() -> bool:
                return (await game.bus.inspect(submitted.job)).state.value == "done"

            await eventually(done, 60, "the reclaimed job completed by the second worker")
        finally:
            assert stopped(second) == 0
        stale_before = game_probe.bus.counters().get("stale", 0)
        stalled.send_signal(signal.SIGCONT)
        await eventually(
            lambda: game_probe.bus.counters().get("stale", 0) == stale_before + 1,
            60,
            "the resumed run refused",
        )
    finally:
        assert stopped(stalled) == 0
    assert game_probe.records(the_round.id) == [guess_of(submitted.job)]
    standing = game_probe.standing(the_round.id, player.id)
    assert (standing.solved, standing.attempts) == (True, 1)
    info = await game.bus.inspect(submitted.job)
    assert (info.state.value, info.attempts) == ("done", 2)
    assert len(game_probe.events(the_round.id)) == 1
