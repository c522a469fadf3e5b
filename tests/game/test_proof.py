"""The seed's proof: at-least-once delivery over a branded-id-deduped effect is exactly-once in effect.

The same guess job submitted any number of times is admitted once, charged once and scored once; a
redelivered job runs as a no-op against the record; a finisher whose lease was reaped is refused. And
the proof page's demo game (:mod:`codemojex.proof`) keeps to its own keys: a demo job, scored by a
worker on the demo bus, writes no key of the real game.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import redis

from codemojex import access, faults, guesses, history, proof, proof_retention, rounds, score_worker, wallet
from codemojex.cli.arguments import bus_settings
from codemojex.cli.parser import build_parser
from codemojex.engine import score
from codemojex.errors import CodemojexError, InvalidOption
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from codemojex.payload import decode_payload
from codemojex.supervisor import ProofRunner
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


async def test_the_demo_game_keeps_to_its_own_bus_round_and_wallet(
    redis_server, tag, game, the_round, player, game_probe
):
    """A demo player's job (crash mark included), scored by a worker on the demo bus, on the demo round:
    not one key of the real game or its bus changes, and the demo round has a secret of its own."""
    before = game_probe.snapshot()
    async with proof.demo_game(redis_server.url, tag) as demo:
        assert demo.bus.tag == f"{tag}.proof"
        demo_round = await proof.ensure_round(demo)
        assert await proof.ensure_round(demo) == demo_round  # kept, not opened twice
        assert demo_round.id != the_round.id
        assert (demo_round.max_guesses, demo_round.prices) == (proof.ROUND_GUESSES, proof.DEMO_PRICES)
        for _ in range(2):  # once: the second call is the same registration and grants nothing
            await proof.ensure_player(demo, player.id)
        assert (await wallet.read_wallet(demo, player.id)).balances == {"proof": 1_000_000}
        job = ids.mint("JOB")
        await faults.request_crash(demo, job)  # the mark lives in the demo keyspace: no worker here is armed
        keys = demo_round.keyboard.keys
        demo_guess = [keys[0], keys[1], keys[2], keys[3], keys[4], keys[5]]
        submission = await guesses.submit(demo, demo_round.id, player.id, demo_guess, job_id=job)
        assert (submission.outcome, submission.charged) == (Outcome.ADMITTED, ("proof", 1))
        assert await proof.pending_total(demo) == 1
        async with running(Worker(demo.bus, score_worker.ScoreWorker(demo).handle)) as worker:
            await eventually(lambda: worker.processed == 1, what="the demo guess scored")
        assert await proof.pending_total(demo) == 0
        assert (await guesses.get_guess(demo, guess_of(job))) is not None
        assert game_probe.client.get(demo.keys.secret(demo_round.id)) is not None
    assert game_probe.snapshot() == before
    assert (await wallet.read_wallet(game, player.id)).balances == {}  # the real wallet: untouched


def test_the_demo_tag_is_the_tag_and_proof():
    assert proof.demo_tag("cm") == "cm.proof"
    with pytest.raises(InvalidOption):
        proof.demo_tag("t" * 27)  # the demo tag would pass the bus's 32 characters


async def test_the_next_demo_round_opens_before_the_current_one_ends(redis_server, tag):
    """A demo round ending within the overlap is followed at once: the proof never lacks a round."""
    async with proof.demo_game(redis_server.url, tag) as demo:
        ending = await rounds.open_round(demo, duration_s=60)
        following = await proof.ensure_round(demo)
        assert following.id != ending.id
        assert following.closes_ms is not None
        assert following.closes_ms - following.opens_ms == int(proof.ROUND_S * 1000)
        assert await proof.current_round(demo) == following
        assert await proof.ensure_round(demo) == following  # an hour left: kept


def _demo_key_count(client, demo_tag: str) -> int:
    """Every key of the demo game (``cmx:`` and the secrets under ``cmxs:``), not its bus."""
    patterns = (f"cmx:{{{demo_tag}}}:*", f"cmxs:{{{demo_tag}}}:*")
    return sum(1 for pattern in patterns for _ in client.scan_iter(match=pattern))


async def _play(demo, round_id, player_id, times):
    """``times`` proof jobs of ``player_id`` (as the proof's POST does): registered if need be, admitted."""
    the_round, secret = await rounds.get_round(demo, round_id), await rounds.read_secret(demo, round_id)
    other = next(key for key in the_round.keyboard.keys if key != secret[-1])
    guess = [*secret[:-1], other]  # five hits (a proven key each round), never solved: the same keys
    for _ in range(times):
        submission = await proof.submit(demo, round_id, player_id, guess, ids.mint("JOB"))
        assert submission.outcome is Outcome.ADMITTED, submission


async def test_demo_keys_stay_bounded_over_many_rounds_and_the_real_game_is_untouched(
    redis_server, tag, game, the_round, player, game_probe
):
    """Many proof jobs over several demo rounds, each purged once closed (grace 0): the demo game's key
    count does not grow with the rounds, the live round keeps its keys, a player who stopped playing is
    deleted and plays again after it, a player who plays on keeps a trimmed ledger that reconciles, and
    not one key of the real game changes (a closed real round included)."""
    real_closed = await rounds.open_round(game, duration_s=60)
    await rounds.close_round(game, real_closed.id)
    before = game_probe.snapshot()
    steady, once = [ids.mint("PLR") for _ in range(2)], ids.mint("PLR")
    demo_tag = proof.demo_tag(tag)
    counts, previous = [], None
    async with proof.demo_game(redis_server.url, tag) as demo:
        async with running(Worker(demo.bus, score_worker.ScoreWorker(demo).handle)) as worker:
            for number in range(6):
                live = await rounds.open_round(demo, duration_s=3600, max_guesses=proof.ROUND_GUESSES)
                for player_id in [*steady, *([once] if number == 0 else [])]:
                    await _play(demo, live.id, player_id, 3)
                total = 3 * (len(steady) * (number + 1) + 1)
                await eventually(lambda total=total: worker.processed == total, what="the proof jobs scored")
                if previous is not None:
                    await rounds.close_round(demo, previous.id)
                    await history.conclude_round(demo, previous.id)  # as the demo worker's upkeep does
                done = await proof_retention.purge(demo, grace_s=0, batch=2, ledger_kept=4)
                assert game_probe.client.hlen(demo.keys.summaries) == 0, "a demo round keeps no summary"
                assert game_probe.client.zcard(demo.keys.history) == 0
                assert done.rounds == ((previous.id,) if previous is not None else ())
                counts.append(_demo_key_count(game_probe.client, demo_tag))
                live_keys = {demo.keys.round(live.id), demo.keys.secret(live.id), demo.keys.board(live.id)}
                assert all(game_probe.client.exists(key) for key in live_keys)  # the live round untouched
                assert len(await guesses.player_guesses(demo, live.id, steady[0])) == 3
                if previous is not None:
                    assert game_probe.client.exists(demo.keys.round(previous.id)) == 0
                    assert game_probe.client.exists(demo.keys.secret(previous.id)) == 0
                previous = live
            assert await rounds.list_rounds(demo, 10) == [live]
            # The player of the first round alone was deleted when it was purged ...
            assert game_probe.client.exists(demo.keys.player(once)) == 0
            assert game_probe.client.exists(demo.keys.results(once)) == 0  # their stats too
            # ... and plays again: registered anew, with a fresh demo grant.
            await _play(demo, live.id, once, 1)
            await eventually(lambda: worker.processed == total + 1, what="the returning player's job")
            assert (await wallet.read_wallet(demo, once)).balances == {"proof": 1_000_000 - 1}
        kept = await wallet.read_wallet(demo, steady[0])
        assert kept.balances == {"proof": 1_000_000 - 3 * 6}
        assert len(kept.ledger) == 4 + 1  # the newest 4 and one carry entry
        assert wallet.reconcile(kept) == []
    assert counts[0] > 0
    assert len(set(counts[1:])) == 1, counts  # flat: one round's keys and two players', whatever the rounds
    assert game_probe.snapshot() == before


async def test_retention_refuses_the_real_game(game, the_round, player, game_probe):
    """The purge runs on a demo tag only: on the real game it raises and reads or deletes nothing, even a
    round closed long ago."""
    await rounds.close_round(game, the_round.id)
    before = game_probe.snapshot()
    with pytest.raises(InvalidOption):
        await proof_retention.purge(game, grace_s=0)
    assert game_probe.snapshot() == before


async def test_a_demo_round_within_its_grace_or_open_is_kept(redis_server, tag):
    """Closed less than the grace ago, or open: kept whole; past the grace: purged."""
    async with proof.demo_game(redis_server.url, tag) as demo:
        closed = await rounds.open_round(demo, duration_s=60)
        await rounds.close_round(demo, closed.id)
        live = await proof.ensure_round(demo)
        assert (await proof_retention.purge(demo, grace_s=3600)).rounds == ()
        assert [r.id for r in await rounds.list_rounds(demo, 10)] == [live.id, closed.id]
        assert (await proof_retention.purge(demo, grace_s=0)).rounds == (closed.id,)
        assert [r.id for r in await rounds.list_rounds(demo, 10)] == [live.id]


async def test_a_short_demo_round_is_followed_and_purged_by_the_runner(redis_server, tag):
    """The ProofRunner's check, with rounds of 1 s and no grace: a round past its close time is purged
    and the next one is open (the purge also runs as the worker's user: see the least-privilege tests)."""
    runner = ProofRunner(redis_server.url, tag, crash=False, round_s=1, grace_s=0)
    await runner.keep()
    async with proof.demo_game(redis_server.url, tag) as demo:
        first = await proof.current_round(demo)
        assert first is not None
        while await rounds.server_ms(demo) < (first.closes_ms or 0):  # its close time passes
            await asyncio.sleep(0.05)
        done = await runner.keep()
        assert done.rounds == (first.id,)
        following = await proof.current_round(demo)
        assert following is not None
        assert following.id != first.id


async def test_the_purge_runs_as_the_workers_user_and_not_as_the_hosts(acl, tag):
    """On a Redis with the game's users: the worker's user (the ProofRunner's) purges a closed demo
    round, its secret and its idle player; the host's user may not (the secret is under ``cmxs:``)."""
    admin = redis.Redis.from_url(
        access.with_user(acl.server.url, access.user_name(access.ADMIN, tag), acl.passwords[access.ADMIN])
    )
    async with proof.demo_game(acl.url(access.WORKER), tag) as demo:
        await access.load_scripts(demo.redis)
        old = await rounds.open_round(demo, duration_s=60)
        player_id = ids.mint("PLR")
        await _play(demo, old.id, player_id, 1)
        await rounds.close_round(demo, old.id)
        await asyncio.sleep(0.01)  # a guess admitted in the very ms of the purge keeps its player
        async with proof.demo_game(acl.url(access.HOST), tag) as host_demo:
            with pytest.raises(CodemojexError):
                await proof_retention.purge(host_demo, grace_s=0)
        done = await proof_retention.purge(demo, grace_s=0)
        assert (done.rounds, done.retired) == ((old.id,), 1)  # the host's try had changed nothing
    assert _demo_key_count(admin, proof.demo_tag(tag)) == 0


def test_the_demo_bus_has_a_bounded_retention_in_the_host_and_the_demo_worker(redis_server, tag):
    """The demo bus's finished jobs go within an hour (not the library's day, nor 180 days when dead):
    the host's demo game and the demo worker serve starts use the same :data:`proof.DEMO_BUS`."""
    assert proof.DEMO_BUS.dedup_window_ms <= 3_600_000
    assert proof.DEMO_BUS.dead_ttl_ms <= 86_400_000
    assert proof.demo_game(redis_server.url, tag).bus.settings == proof.DEMO_BUS
    runner = ProofRunner(redis_server.url, tag, crash=False)
    args = build_parser().parse_args(runner.supervisor.argv[3:])
    assert bus_settings(args) == proof.DEMO_BUS
    assert bus_settings(build_parser().parse_args(["worker"])) is None  # the real worker: the defaults


async def test_a_round_of_many_players_is_purged_whole_in_small_batches(redis_server, tag, game_probe):
    """More players than a small hash's listpack (a hashtable quota, whose HSCAN pages may be empty before
    the end), purged 10 at a time: every one retired, not one key of the round left."""
    async with proof.demo_game(redis_server.url, tag) as demo:
        old = await rounds.open_round(demo, duration_s=60)
        many = [ids.mint("PLR") for _ in range(150)]
        for player_id in many:
            await _play(demo, old.id, player_id, 1)
        await rounds.close_round(demo, old.id)
        await asyncio.sleep(0.01)  # a guess admitted in the very ms of the purge keeps its player
        done = await proof_retention.purge(demo, grace_s=0, batch=10)
        assert (done.rounds, done.retired) == ((old.id,), len(many))
    left = list(game_probe.client.scan_iter(match=f"cmx*:{{{proof.demo_tag(tag)}}}:*"))
    assert left == []  # the jobs wait on the demo bus (no worker here): its keys are the bus's
