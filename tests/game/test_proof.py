"""The seed's proof: at-least-once delivery over a branded-id-deduped effect is exactly-once in effect.

The same guess job submitted any number of times is admitted once, charged once and scored once; a
redelivered job runs as a no-op against the record; a finisher whose lease was reaped is refused.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from codemojex import guesses, score_worker, wallet
from codemojex.engine import score
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from codemojex.payload import decode_payload
from echomq import Finish, Worker, ids
from tests.support.game import SECRET, claim_job, text
from tests.support.workers import eventually, running

GUESS = ("🍎", "🍌", "🍒", "🍇", "🍑", "🍍")  # against 🍎🍌🍇🍎🍒🥝: H H N N - -


@pytest.mark.parametrize("times", [1, 2, 50])
async def test_the_same_guess_job_submitted_n_times_is_admitted_charged_and_scored_once(
    game, the_round, player, game_probe, times
):
    """n submits of one JOB id (concurrently): one admission, n-1 duplicates, one debit, one record."""
    job = ids.mint("JOB")
    submissions = await asyncio.gather(
        *(guesses.submit(game, the_round.id, player.id, text(GUESS), job_id=job) for _ in range(times))
    )
    outcomes = sorted(s.outcome for s in submissions)
    assert outcomes.count(Outcome.ADMITTED) == 1
    assert outcomes.count(Outcome.DUPLICATE) == times - 1
    assert {s.charged for s in submissions} == {("ticket", 1)}  # duplicates report the original charge
    assert game_probe.ledger_jobs(player.id) == [job]

    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle)) as worker:
        await eventually(lambda: worker.processed == 1, what="the guess scored")
        # Submitting again after it was scored is still a duplicate: nothing charged, nothing queued.
        again = await guesses.submit(game, the_round.id, player.id, text(GUESS), job_id=job)
        assert again.outcome is Outcome.DUPLICATE

    assert game_probe.records(the_round.id) == [guess_of(job)]
    record = game_probe.record(guess_of(job))
    assert record["code"] == "HHNN--"
    assert record["attempt"] == "1"
    standing = game_probe.standing(the_round.id, player.id)
    assert (standing.best_hits, standing.best_nears, standing.attempts, standing.solved) == (2, 2, 1, False)
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 50, "ticket": 2}
    counters = game_probe.bus.counters()
    assert counters["admitted"] == 1
    assert counters["duplicate"] == times
    assert counters["completed"] == 1
    assert [e["kind"] for e in game_probe.events(the_round.id)] == ["scored"]


async def test_a_redelivered_job_runs_as_a_no_op_against_its_record(game, the_round, player, game_probe):
    """The effect landed, the ack did not: the next claim finds the record, completes, counts nothing."""
    submission = await guesses.submit(game, the_round.id, player.id, text(GUESS))
    first = await claim_job(game.bus, lease_ms=60_000)
    # The first delivery's effect without its completion: what a crash between the two leaves.
    request, feedback = decode_payload(first.payload), score(SECRET, GUESS)
    scored = await game.run(
        "score", *score_worker.score_call(game, first.claim, request, feedback, finish=False)
    )
    assert list(scored) == [2, 1]
    game_probe.bus.expire(first.id)
    assert (await game.bus.sweep()).reclaimed == 1

    second = await claim_job(game.bus)
    assert second.attempt == 2
    assert await score_worker.handle(game, second) is Finish.DONE

    assert game_probe.records(the_round.id) == [guess_of(submission.job)]
    assert game_probe.standing(the_round.id, player.id).attempts == 1
    assert (await game.bus.inspect(submission.job)).state.value == "done"
    assert len(game_probe.events(the_round.id)) == 1


# A finisher from another process that knows only the reaped claim's token.
STALE_FINISHER = """
import asyncio, sys
from codemojex import score_worker
from codemojex.game import Game
from echomq import Bus, Claim, Job
async def main():
    url, tag, job, lane, payload = sys.argv[1:6]
    async with Game(Bus.from_url(url, tag=tag)) as game:
        claim = Claim(job, lane, token=1, payload=payload.encode())
        print((await score_worker.handle(game, Job(claim))).value)
asyncio.run(main())
"""


async def test_a_worker_whose_lease_was_reaped_and_reclaimed_cannot_complete(
    redis_server, tag, game, the_round, player, game_probe
):
    """Reaped and re-claimed: the old owner's finish (from another process) is stale and counts nothing."""
    submission = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    stale = await claim_job(game.bus)
    game_probe.bus.expire(stale.id)
    assert (await game.bus.sweep()).reclaimed == 1
    owner = await claim_job(game.bus)
    assert owner.attempt == 2

    def late_finish() -> str:
        late = subprocess.run(
            [sys.executable, "-c", STALE_FINISHER, redis_server.url, tag, stale.id, stale.lane,
             stale.payload.decode()],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        return late.stdout.strip()

    before = game_probe.snapshot()
    assert late_finish() == "stale"
    after = game_probe.snapshot()
    stats = game.bus.keys.stats
    assert {k: v for k, v in after.items() if k != stats} == {k: v for k, v in before.items() if k != stats}
    assert game_probe.records(the_round.id) == []

    assert await score_worker.handle(game, owner) is Finish.DONE
    assert late_finish() == "stale"  # and after the owner finished, still refused
    assert game_probe.records(the_round.id) == [guess_of(submission.job)]
    standing = game_probe.standing(the_round.id, player.id)
    assert (standing.solved, standing.attempts) == (True, 1)
    assert game_probe.bus.counters()["stale"] == 2
