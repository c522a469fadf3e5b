"""A hypothesis state machine plays Codemojex on real Redis: every guess counts exactly once in effect.

The machine registers a few players and credits them, submits guesses (fresh ones, sometimes the
secret; retries of the same job; the same job id with another guess or player; a job id refused for
want of funds, again after a credit), claims guess jobs, scores them with the real handler, crashes a
worker after the effect but before the acknowledgement (``score.lua`` with ``finish=False``), lets
leases run out (the probe moves a deadline to the epoch and the sweep reaps it, dead-lettering a job on
its last try), finishes with reaped claims, and drains the queue. A pure model predicts every outcome:
admitted with the first price the wallet can pay (ticket=1, else coin=5) after the round's allowance
(tickets topped up to 3 at the player's first admission), a solve reward once, duplicate with the original
charge, conflict, refused for funds or for a solve (a player is solved once a solving guess is
*scored*), done or stale. A refusal, a duplicate, a conflict and a stale finish change no key but the
bus's counters.

After every step the real state must say:

* effect: the GES records are exactly the jobs the model says were scored (an effect ran at least
  once), one each, listed in admission order, numbered (``serial``) in the order scored, with the
  model's ``counted`` and ``attempt``; one ``scored`` event each, in the order scored; the proven hits
  are those of the scored guesses;
* standings: each player's standing is the model's :func:`codemojex.ranking.fold` of their scored
  guesses in admission order (JOB id order; attempts counted until the solving guess, whenever each was
  scored), and the board equals ``leaderboard.recompute`` of the records;
* wallets: balances are the model's, never negative, the ledger reconciles, and each admitted job is
  debited exactly once, in its player's ledger;
* queue: each admitted job is in exactly one place, in the state the model says, and the bus's counters
  are the model's.

The ``drain`` rule then shows the end of the story: however the run went, reaping every lease, reviving
the dead and handling every job leaves each admitted job done and scored exactly once.

Time never passes: leases are 60 s and expiry is simulated (tests/support/probe.py). Each example runs
on a fresh tag of the session's redis-server, in a database of this test's own (the invariants SCAN the
keyspace after every step, and other tests leave thousands of keys in database 0); its keys are deleted
after it. One event loop, owned by the test, runs every async call.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from codemojex import economy, guesses, leaderboard, players, ranking, rounds, score_worker, wallet
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome, Refusal
from codemojex.keys import guess_of
from codemojex.payload import decode_payload, encode_payload
from echomq import Bus, Claim, Finish, Job
from tests.support.game import KEYBOARD, SECRET, GameProbe, text

T = TypeVar("T")
Snapshot = dict[str, tuple[str, Any, bool]]  # key -> (type, value, has a TTL)
_tags = itertools.count()

MAX_PLAYERS = 4
MAX_ATTEMPTS = 2  # deliveries before the sweep dead-letters a job: small, so the dead path is reached
GRANT = (("ticket", 2), ("coin", 7))  # three guesses (1 + 1 + 5), then the player needs a credit
ALLOWANCE = (("ticket", 3),)  # the first admitted guess tops tickets up to 3 (once in the round)
REWARD = (("coin", 5),)  # the solve pays one more coin guess, once
LEASE_MS = 60_000  # never runs out by itself during a test; the probe expires leases instead
DATABASE = 7  # of the session's server: the invariants SCAN, and other tests leave many keys in 0
COUNTED = ("admitted", "duplicate", "conflict", "claimed", "completed", "stale", "reclaimed", "dead")

RANDOM_GUESS = st.tuples(*[st.sampled_from(KEYBOARD)] * 6)
GUESSES = st.one_of(
    RANDOM_GUESS,
    st.just(SECRET),
    RANDOM_GUESS.map(lambda guess: SECRET[:3] + guess[3:]),  # at least three hits, maybe the secret
)


@dataclass
class ModelJob:
    id: str
    player: str
    guess: tuple[str, ...]
    charge: tuple[str, int]
    created_ms: int  # the job row's admission time: what the standing's best_at_ms is taken from
    state: str = "queued"  # queued | active | done | dead, as the bus names them
    token: int = 0  # the attempts token of its latest claim
    tries: int = 0  # tries spent against MAX_ATTEMPTS (retry_dead resets them)


class Model:
    """The game as the design describes it: wallets, admissions, the queue's states, the effects."""

    def __init__(self) -> None:
        self.players: list[str] = []  # in registration order
        self.balances: dict[str, dict[str, int]] = {}
        self.jobs: dict[str, ModelJob] = {}  # in admission order
        self.scored: list[str] = []  # job ids in the order their effect first ran
        self.records: dict[str, tuple[bool, int]] = {}  # job -> (counted, attempt) in admission order
        self.standings: dict[str, ranking.Standing] = {}
        self.proven: dict[str, dict[int, str]] = {}
        self.counters: Counter[str] = Counter()
        self.taken: set[str] = set()  # players who took the round's allowance (their first admission)
        self.rewarded: set[str] = set()  # players paid the solve reward

    def register(self, player: str) -> None:
        self.players.append(player)
        self.balances[player] = dict(GRANT)
        self.proven[player] = {}

    def short(self) -> list[str]:
        """The players without a ticket (their next guess costs coins, or is refused)."""
        return [player for player in self.players if self.balances[player]["ticket"] == 0]

    def solved(self, player: str) -> bool:
        standing = self.standings.get(player)
        return standing is not None and standing.solved

    def expect_submit(self, player: str) -> Refusal | tuple[str, int]:
        """What a new submission of ``player`` gets: its charge, or the refusal."""
        if self.solved(player):
            return Refusal.ALREADY_SOLVED
        balance = self.topped(player)
        if balance["ticket"] >= 1:
            return "ticket", 1
        if balance["coin"] >= 5:
            return "coin", 5
        return Refusal.INSUFFICIENT_FUNDS

    def topped(self, player: str) -> dict[str, int]:
        """The balances a new admission of ``player`` is charged from: the round's allowance first."""
        if player in self.taken:
            return self.balances[player]
        return economy.after(self.balances[player], economy.top_up(ALLOWANCE, self.balances[player]))

    def admit(self, job: ModelJob) -> None:
        self.balances[job.player] = self.topped(job.player)
        self.taken.add(job.player)
        currency, amount = job.charge
        self.balances[job.player][currency] -= amount
        self.jobs[job.id] = job
        self.counters["admitted"] += 1

    def in_state(self, *states: str) -> list[ModelJob]:
        return [job for job in self.jobs.values() if job.state in states]

    def is_current(self, claim: Claim) -> bool:
        job = self.jobs[claim.job]
        return job.state == "active" and job.token == claim.token

    def claimed(self, claim: Claim) -> None:
        job = self.jobs[claim.job]
        assert job.state == "queued", f"claimed {job.id}, which the model has {job.state}"
        assert (claim.lane, claim.token, claim.tries) == (job.player, job.token + 1, job.tries + 1)
        job.state, job.token, job.tries = "active", claim.token, job.tries + 1
        self.counters["claimed"] += 1

    def effect(self, job_id: str) -> int:
        """score.lua's effect under a current claim: 1 if it wrote the record, 0 if it found one."""
        if job_id in self.records:
            return 0
        job = self.jobs[job_id]
        self.scored.append(job_id)
        self.refold(job.player)
        if self.standings[job.player].solved and job.player not in self.rewarded:
            self.rewarded.add(job.player)
            self.balances[job.player] = economy.after(self.balances[job.player], REWARD)
        feedback = score(SECRET, job.guess)
        for position, mark in enumerate(feedback.code()):
            if mark == "H":
                self.proven[job.player][position] = job.guess[position]
        return 1

    def refold(self, player: str) -> None:
        """The player's standing and the (counted, attempt) of each of their records: their scored jobs
        folded in admission order (JOB id order), whatever order they were scored in."""
        standing: ranking.Standing | None = None
        for job_id in sorted(job_id for job_id in self.scored if self.jobs[job_id].player == player):
            job = self.jobs[job_id]
            feedback = score(SECRET, job.guess)
            counted = standing is None or not standing.solved
            standing = ranking.fold(standing, player, feedback.hits, feedback.nears, job.created_ms)
            self.records[job_id] = (counted, standing.attempts if counted else 0)
        assert standing is not None
        self.standings[player] = standing

    def finish(self, claim: Claim) -> Finish:
        """handle(): the effect and the completion if the claim is current; DONE again if this very
        claim completed the job (a retry of its call, whose reply was lost); else stale."""
        job = self.jobs[claim.job]
        if job.state == "done" and job.token == claim.token:
            return Finish.DONE
        if not self.is_current(claim):
            self.counters["stale"] += 1
            return Finish.STALE
        self.effect(claim.job)
        self.jobs[claim.job].state = "done"
        self.counters["completed"] += 1
        return Finish.DONE

    def reap(self, job_id: str) -> str:
        """The sweep on an expired lease: back to the lane, or dead on the last try."""
        job = self.jobs[job_id]
        assert job.state == "active"
        job.state = "dead" if job.tries >= MAX_ATTEMPTS else "queued"
        self.counters["dead" if job.state == "dead" else "reclaimed"] += 1
        return job.state

    def revive(self, job_id: str) -> None:
        job = self.jobs[job_id]
        assert job.state == "dead"
        job.state, job.tries = "queued", 0
        self.counters["resurrected"] += 1


class GameMachine(RuleBasedStateMachine):
    """Random play on one game (one round), each step checked against the model."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop, client: redis.Redis) -> None:
        super().__init__()
        self.loop = loop
        self.client = client
        bus = Bus.from_url(url, tag=f"gm{os.getpid()}-{next(_tags)}")
        self.game = Game(
            bus,
            GameSettings(grant=GRANT, allowance=ALLOWANCE, solve_reward=REWARD, max_attempts=MAX_ATTEMPTS),
        )
        self.probe = GameProbe.of(client, self.game)
        self.model = Model()
        self.round_id = ""
        self.held: list[Claim] = []  # claims a live (maybe stalled) worker holds and has not finished
        self.late: list[Claim] = []  # claims that may come back once more: acked ones, crashed ones
        self.refused: list[tuple[str, str, tuple[str, ...]]] = []  # (job, player, guess) never admitted

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.game.aclose())
        for pattern in (self.game.bus.keys.pattern, self.game.keys.pattern):
            for key in list(self.client.scan_iter(match=pattern, count=1000)):
                self.client.delete(key)

    # -- helpers ----------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every key of the bus and of the game with its type, full value and whether it has a TTL: what
        GameProbe.snapshot reads, but pipelined (it brackets most steps, so it must be quick)."""
        patterns = (self.game.bus.keys.pattern, self.game.keys.pattern)
        keys = sorted(key for pattern in patterns for key in self.client.scan_iter(match=pattern, count=1000))
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.type(key)
        kinds = [kind.decode() for kind in pipe.execute()]
        for key, kind in zip(keys, kinds, strict=True):
            _read_value(pipe, kind, key)
            pipe.pttl(key)
        replies = pipe.execute()
        return {
            key.decode(): (kind, value, ttl > 0)
            for key, kind, value, ttl in zip(keys, kinds, replies[::2], replies[1::2], strict=True)
        }

    def unchanged(self, before: Snapshot, **deltas: int) -> None:
        """No key changed since ``before`` but the bus's counters, by exactly ``deltas``."""
        after = self.snapshot()
        stats = self.game.bus.keys.stats
        assert {k: v for k, v in after.items() if k != stats} == {
            k: v for k, v in before.items() if k != stats
        }, "keys other than the bus's counters changed"
        old, new = _counters(before.get(stats)), _counters(after.get(stats))
        moved = {name: new.get(name, 0) - old.get(name, 0) for name in set(old) | set(new)}
        assert {name: delta for name, delta in moved.items() if delta} == deltas

    def submit(self, player: str, guess: tuple[str, ...], job_id: str | None = None) -> guesses.Submission:
        return self.run(guesses.submit(self.game, self.round_id, player, text(guess), job_id=job_id))

    def submit_new(self, player: str, guess: tuple[str, ...], job_id: str | None = None) -> None:
        """Submit a job id the bus has never admitted; the model predicts the charge or the refusal."""
        expected = self.model.expect_submit(player)
        before = self.snapshot() if isinstance(expected, Refusal) else {}
        got = self.submit(player, guess, job_id)
        if job_id is not None:
            assert got.job == job_id
        if isinstance(expected, Refusal):
            assert (got.outcome, got.refusal, got.charged) == (Outcome.REFUSED, expected, None)
            self.unchanged(before)  # nothing charged, nothing enqueued, nothing counted
            if job_id is None:
                assert got.job is not None
                self.refused.append((got.job, player, guess))
            return
        assert (got.outcome, got.guess, got.charged) == (Outcome.ADMITTED, guess, expected)
        assert got.job is not None
        if job_id is not None:
            self.refused = [entry for entry in self.refused if entry[0] != job_id]
        created = self.probe.bus.field(got.job, "created")
        assert created is not None
        self.model.admit(ModelJob(got.job, player, guess, expected, int(created)))

    def take_claim(self) -> Claim:
        claims = self.run(self.game.bus.claim(1, lease_ms=LEASE_MS))
        assert len(claims) == 1, "the model has a queued job but the bus gave none"
        claim = claims[0]
        self.model.claimed(claim)
        job = self.model.jobs[claim.job]
        assert claim.payload == encode_payload(self.round_id, job.player, job.guess)
        return claim

    def finish(self, claim: Claim) -> Finish:
        """The real handler with ``claim``; a stale finish must change nothing but the counters."""
        current = self.model.is_current(claim)
        before = {} if current else self.snapshot()
        outcome = self.run(score_worker.handle(self.game, Job(claim)))
        assert outcome is self.model.finish(claim)
        if not current:
            self.unchanged(before, **({"stale": 1} if outcome is Finish.STALE else {}))
        return outcome

    def reap(self, jobs: list[ModelJob]) -> None:
        """Expire the leases of ``jobs`` (all active) and sweep once."""
        for job in jobs:
            self.probe.bus.expire(job.id)
        outcomes = Counter(self.model.reap(job.id) for job in jobs)
        report = self.run(self.game.bus.sweep())
        assert (report.promoted, report.reclaimed, report.dead, report.trimmed) == (
            0,
            outcomes["queued"],
            outcomes["dead"],
            0,
        )

    def retryable(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """The refused submissions whose player could now pay (and has not solved)."""
        return [
            entry for entry in self.refused if not isinstance(self.model.expect_submit(entry[1]), Refusal)
        ]

    async def read_views(
        self,
    ) -> tuple[list[guesses.GuessRecord], list[leaderboard.Entry], list[wallet.Wallet]]:
        """What the game's own readers say: the round's records, its board, every player's wallet."""
        records = await leaderboard.scored_records(self.game, self.round_id)
        board = await leaderboard.read_board(self.game, self.round_id)
        wallets = [await wallet.read_wallet(self.game, player) for player in self.model.players]
        return records, board, wallets

    def current_held(self) -> list[Claim]:
        return [claim for claim in self.held if self.model.is_current(claim)]

    def stale_claims(self) -> list[Claim]:
        return [claim for claim in self.held + self.late if not self.model.is_current(claim)]

    # -- players and wallets ----------------------------------------------------------------------

    @initialize()
    def open_the_round(self) -> None:
        """Open the fruit round with its known secret and register the first player."""
        the_round = self.run(rounds.open_round(self.game, keyboard=list(KEYBOARD), secret=list(SECRET)))
        self.round_id = the_round.id
        self.register()

    @precondition(lambda self: len(self.model.players) < MAX_PLAYERS)
    @rule()
    def register(self) -> None:
        """Register a player, who gets the grant."""
        player = self.run(players.register(self.game, f"P{len(self.model.players)}"))
        self.model.register(player.id)

    @precondition(lambda self: self.model.short())
    @rule(data=st.data(), currency=st.sampled_from(("ticket", "coin")), amount=st.integers(1, 10))
    def credit(self, data: st.DataObject, currency: str, amount: int) -> None:
        """Credit some tickets or coins to a player who has run out of tickets."""
        player = data.draw(st.sampled_from(self.model.short()))
        balance = self.run(wallet.credit(self.game, player, currency, amount, reason="top_up"))
        self.model.balances[player][currency] += amount
        assert balance == self.model.balances[player][currency]

    # -- submissions ------------------------------------------------------------------------------

    @rule(data=st.data(), guess=GUESSES)
    def submit_guess(self, data: st.DataObject, guess: tuple[str, ...]) -> None:
        """A player submits a new guess: admitted and charged, or refused (funds, solved)."""
        self.submit_new(data.draw(st.sampled_from(self.model.players)), guess)

    @precondition(lambda self: self.retryable())
    @rule(data=st.data())
    def retry_refused(self, data: st.DataObject) -> None:
        """A job id refused for want of funds is submitted again after a credit: admitted, charged once."""
        job, player, guess = data.draw(st.sampled_from(self.retryable()))
        self.submit_new(player, guess, job)

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data(), change=st.sampled_from(("nothing", "guess", "player")), other=GUESSES)
    def resubmit(self, data: st.DataObject, change: str, other: tuple[str, ...]) -> None:
        """An admitted job id comes again: with its guess a duplicate (the original charge, nothing
        changed); with another guess, or from another player, an idempotency conflict."""
        job = data.draw(st.sampled_from(list(self.model.jobs.values())))
        others = [player for player in self.model.players if player != job.player]
        player, guess = job.player, job.guess
        if change == "player" and others:
            player = data.draw(st.sampled_from(others))
        elif change != "nothing":
            guess = other if other != job.guess else _another(job.guess)
        before = self.snapshot()
        got = self.submit(player, guess, job.id)
        if (player, guess) == (job.player, job.guess):
            assert (got.outcome, got.job, got.guess, got.charged) == (
                Outcome.DUPLICATE,
                job.id,
                job.guess,
                job.charge,
            )
            self.model.counters["duplicate"] += 1
            self.unchanged(before, duplicate=1)
        else:
            assert (got.outcome, got.refusal, got.job, got.charged) == (
                Outcome.REFUSED,
                Refusal.IDEMPOTENCY_CONFLICT,
                job.id,
                None,
            )
            self.model.counters["conflict"] += 1
            self.unchanged(before, conflict=1)

    # -- the score worker -------------------------------------------------------------------------

    @precondition(lambda self: self.model.in_state("queued"))
    @rule()
    def claim(self) -> None:
        """A worker claims the next guess job (60 s lease) and holds it."""
        self.held.append(self.take_claim())

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def finish_held(self, data: st.DataObject) -> None:
        """A worker finishes its claim with the real handler: done if current, stale if reaped."""
        claim = data.draw(st.sampled_from(self.held))
        self.held.remove(claim)
        if self.finish(claim) is Finish.DONE:
            self.late.append(claim)  # its ack may be delivered again

    @precondition(lambda self: self.current_held())
    @rule(data=st.data())
    def crash_after_effect(self, data: st.DataObject) -> None:
        """A worker runs the effect without the completion, then dies (its claim dropped, still active)."""
        claim = data.draw(st.sampled_from(self.current_held()))
        job = self.model.jobs[claim.job]
        feedback = score(SECRET, job.guess)
        call = score_worker.score_call(
            self.game, claim, decode_payload(claim.payload), feedback, finish=False
        )
        reply = self.run(self.game.run("score", *call))
        assert [int(part) for part in reply] == [2, self.model.effect(claim.job)]  # 2: not completed
        assert self.probe.bus.field(claim.job, "state") == "active"
        self.held.remove(claim)
        self.late.append(claim)

    @precondition(lambda self: self.model.in_state("active"))
    @rule(data=st.data(), reclaim=st.booleans())
    def lease_runs_out(self, data: st.DataObject, reclaim: bool) -> None:
        """An active job's lease runs out and the sweep reaps it, so its claim is stale from now on;
        maybe another worker claims the next job at once (often the same job, under a new token)."""
        self.reap([data.draw(st.sampled_from(self.model.in_state("active")))])
        if reclaim and self.model.in_state("queued"):
            self.held.append(self.take_claim())

    @precondition(lambda self: self.stale_claims())
    @rule(data=st.data())
    def finish_stale(self, data: st.DataObject) -> None:
        """A claim whose lease was reaped finishes: stale; one that already finished (a retry): done.
        Nothing changes either way."""
        claim = data.draw(st.sampled_from(self.stale_claims()))
        for pool in (self.held, self.late):
            if claim in pool:
                pool.remove(claim)
        self.finish(claim)

    @precondition(lambda self: self.model.in_state("queued", "active", "dead"))
    @rule()
    def drain(self) -> None:
        """Reap every lease, revive the dead, handle every job: each admitted job is scored exactly once."""
        if active := self.model.in_state("active"):
            self.reap(active)
        for job in self.model.in_state("dead"):
            assert self.run(self.game.bus.retry_dead(job.id)) is True
            self.model.revive(job.id)
        self.late.extend(self.held)  # their workers stalled past the lease: they may come back late
        self.held = []
        for _ in self.model.in_state("queued"):
            assert self.finish(self.take_claim()) is Finish.DONE
        assert self.run(self.game.bus.claim(1, lease_ms=LEASE_MS)) == []
        assert self.model.in_state("done") == list(self.model.jobs.values())
        assert sorted(self.model.scored) == sorted(self.model.jobs)
        assert self.probe.records(self.round_id) == sorted(guess_of(job) for job in self.model.scored)

    # -- after every step -------------------------------------------------------------------------

    @invariant()
    def each_guess_counts_once(self) -> None:
        """Records, standings, board, wallets, ledgers and the queue all agree with the model."""
        model, probe, keys, round_id = self.model, self.probe, self.game.keys, self.round_id

        # The queue: each admitted job in exactly one place, in the model's state; the counters.
        assert probe.bus.check() == {job.id: job.state for job in model.jobs.values()}
        counters = probe.bus.counters()
        assert {name: counters.get(name, 0) for name in (*COUNTED, "resurrected")} == {
            name: model.counters[name] for name in (*COUNTED, "resurrected")
        }

        records, entries, wallets = self.run(self.read_views())

        # The effect: one GES record per scored job, none for anything else, listed in admission order.
        stored = {key.decode() for key in self.client.scan_iter(match=f"{keys.prefix}guess:*", count=1000)}
        assert stored == {keys.guess(guess_of(job)) for job in model.scored}
        assert [
            (r.id, r.serial, r.job, r.player, r.guess, r.feedback, r.submitted_ms, r.counted, r.attempt)
            for r in records
        ] == sorted(
            (
                guess_of(job_id),
                serial,
                job_id,
                model.jobs[job_id].player,
                model.jobs[job_id].guess,
                score(SECRET, model.jobs[job_id].guess),
                model.jobs[job_id].created_ms,
                *model.records[job_id],
            )
            for serial, job_id in enumerate(model.scored, start=1)
        )
        events = probe.events(round_id)
        assert [(e["kind"], e["guess"]) for e in events] == [("scored", guess_of(j)) for j in model.scored]

        # Standings: the fold of each player's scored guesses; the board is the records' recompute.
        for player in model.players:
            assert probe.standing(round_id, player) == model.standings.get(player)
            proven = self.client.hgetall(keys.proven(round_id, player))
            assert {int(k): v.decode() for k, v in proven.items()} == model.proven[player]
        board = [entry.standing for entry in entries]
        assert board == leaderboard.recompute(records) == ranking.rank(model.standings.values())

        # Wallets: the model's balances, never negative, reconciled; one debit per admitted job.
        for player, purse in zip(model.players, wallets, strict=True):
            assert purse.balances == model.balances[player]
            assert min(purse.balances.values()) >= 0
            assert wallet.reconcile(purse) == []
            admitted = [job.id for job in model.jobs.values() if job.player == player]
            assert probe.ledger_jobs(player) == admitted
        charges = self.client.hgetall(keys.charges(round_id))
        assert {k.decode(): v.decode() for k, v in charges.items()} == {
            job.id: f"{job.charge[0]}={job.charge[1]}" for job in model.jobs.values()
        }


def _another(guess: tuple[str, ...]) -> tuple[str, ...]:
    """A guess other than ``guess``: its first key moved one place along the keyboard."""
    return (KEYBOARD[(KEYBOARD.index(guess[0]) + 1) % len(KEYBOARD)], *guess[1:])


def _read_value(pipe: Any, kind: str, key: bytes) -> None:
    if kind == "hash":
        pipe.hgetall(key)
    elif kind == "zset":
        pipe.zrange(key, 0, -1, withscores=True)
    elif kind == "list":
        pipe.lrange(key, 0, -1)
    elif kind == "string":
        pipe.get(key)
    else:  # the events stream: compared in its serialized form, as GameProbe.snapshot does
        pipe.dump(key)


def _counters(entry: tuple[str, Any, bool] | None) -> dict[str, int]:
    return {} if entry is None else {k.decode(): int(v) for k, v in entry[1].items()}


@pytest.mark.slow
@pytest.mark.timeout(600)  # room for hypothesis to shrink a failure to a short story
def test_every_guess_counts_exactly_once(redis_server):
    """Random play (submits, retries, claims, handles, crashes, expiries, stale finishes) agrees with the
    model, and no guess ever counts twice or not at all."""
    url = f"{redis_server.url.rsplit('/', 1)[0]}/{DATABASE}"
    client = redis.Redis.from_url(url)
    loop = asyncio.new_event_loop()
    try:
        run_state_machine_as_test(
            lambda: GameMachine(url, loop, client),
            settings=settings(
                max_examples=60,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        loop.close()
        client.close()
