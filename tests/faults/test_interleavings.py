"""The protocol, step by step: two workers, the sweep and a producer interleaved by hypothesis on real
Redis, checked against the conformance suite's invariants after every step.

Each worker (``A``, ``B``) holds the claims it made, and may at any step: claim, score one of its jobs
(``score.lua``: the effect and the fenced completion at once), write the effect and die before the
acknowledgement (``finish=0``, its claims forgotten), die holding everything, renew its leases, or
finish late with a claim whose lease was reaped (stale). Time passes for one job (its deadline moves to
the epoch), the sweep runs, and the producer submits new guesses and retries old ones (same JOB id).

After every step, from Redis alone (:mod:`codemojex.conformance.invariants`): each job is in exactly one
location, the ring is the non-empty lanes, no effect applied twice (one latency observation per GES
record, at most one ``scored`` event per job, attempts counted once per record), wallets reconcile and
each admitted guess is charged once, the board is the ranking of the records. At the end the machine
drains (reaps every lease, sweeps, scores what is left) and every acknowledged guess must be scored
exactly once: nothing lost.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Coroutine
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

from codemojex import guesses, players, rounds, score_worker, wallet
from codemojex.conformance import invariants
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.payload import decode_payload
from echomq import Bus, Claim, Job, ids

T = TypeVar("T")
DATABASE = 8  # a database of this test's own: the invariants scan the keyspace after every step
KEYBOARD = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥")
SECRET = ("🍎", "🍌", "🍇", "🍎", "🍒", "🥝")
WORKERS = ("A", "B")
_tags = itertools.count()


class Interleavings(RuleBasedStateMachine):
    def __init__(self, url: str, loop: asyncio.AbstractEventLoop, client: redis.Redis) -> None:
        super().__init__()
        self.loop = loop
        self.client = client
        bus = Bus.from_url(url, tag=f"il{os.getpid()}-{next(_tags)}")
        self.game = Game(bus, GameSettings(max_attempts=50, max_queued=10_000))
        self.round_id = ""
        self.players: list[str] = []
        self.held: dict[str, list[Claim]] = {name: [] for name in WORKERS}
        self.reaped: list[Claim] = []  # claims whose worker lost them (stale if used)
        self.acknowledged: set[str] = set()
        self.sent: list[tuple[str, str, tuple[str, ...]]] = []  # (job, player, guess) submitted

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.game.aclose())
        for pattern in (self.game.bus.keys.pattern, self.game.keys.pattern):
            for key in list(self.client.scan_iter(match=pattern, count=1000)):
                self.client.delete(key)

    # -- the producer ------------------------------------------------------------------------------

    @initialize()
    def open(self) -> None:
        the_round = self.run(rounds.open_round(self.game, keyboard=list(KEYBOARD), secret=list(SECRET)))
        self.round_id = the_round.id
        for name in ("P1", "P2"):
            player = self.run(players.register(self.game, name))
            self.run(wallet.credit(self.game, player.id, "ticket", 100, reason="model"))
            self.players.append(player.id)

    @rule(player=st.integers(0, 1), keys=st.lists(st.sampled_from(KEYBOARD[1:]), min_size=6, max_size=6))
    def submit_new(self, player: int, keys: list[str]) -> None:
        """A fresh guess (never the secret: it starts with a key the secret does not hold there)."""
        self._submit(ids.mint("JOB"), self.players[player], tuple(keys))

    @precondition(lambda self: self.sent)
    @rule(data=st.data())
    def submit_again(self, data: st.DataObject) -> None:
        """A retry of a sent guess with its JOB id: a duplicate, nothing charged."""
        job, player, guess = data.draw(st.sampled_from(self.sent))
        outcome = self._submit(job, player, guess)
        assert outcome is guesses.Outcome.DUPLICATE

    def _submit(self, job: str, player: str, guess: tuple[str, ...]) -> guesses.Outcome:
        made = self.run(guesses.submit(self.game, self.round_id, player, guess, job_id=job))
        assert made.outcome is not guesses.Outcome.REFUSED, made
        self.acknowledged.add(job)
        if (job, player, guess) not in self.sent:
            self.sent.append((job, player, guess))
        return made.outcome

    # -- the workers -------------------------------------------------------------------------------

    @rule(worker=st.sampled_from(WORKERS), count=st.integers(1, 2))
    def claim(self, worker: str, count: int) -> None:
        self.held[worker] += self.run(self.game.bus.claim(count, lease_ms=60_000, owner=worker))

    def _score(self, claim: Claim, *, finish: bool) -> int:
        request = decode_payload(claim.payload)
        feedback = score(SECRET, request.guess)
        call = score_worker.score_call(self.game, claim, request, feedback, finish=finish)
        return int(self.run(self.game.run("score", *call))[0])

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def score_and_finish(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]))
        claim = self.held[worker].pop(data.draw(st.integers(0, len(self.held[worker]) - 1)))
        finish = self.run(score_worker.handle(self.game, Job(claim)))
        assert finish.value in ("done", "stale")

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def effect_then_die(self, data: st.DataObject) -> None:
        """The effect is written, the acknowledgement never sent, and the worker dies with all it held."""
        worker = data.draw(st.sampled_from([w for w in WORKERS if self.held[w]]))
        claim = self.held[worker][0]
        assert self._score(claim, finish=False) in (0, 2)  # 2: applied (or found) without completing
        self.reaped += self.held[worker]
        self.held[worker] = []

    @rule(worker=st.sampled_from(WORKERS))
    def die(self, worker: str) -> None:
        self.reaped += self.held[worker]
        self.held[worker] = []

    @precondition(lambda self: any(self.held.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def renew(self, worker: str) -> None:
        for claim in self.held[worker]:
            self.run(self.game.bus.extend(claim, 60_000))

    @precondition(lambda self: self.reaped)
    @rule(data=st.data())
    def finish_late(self, data: st.DataObject) -> None:
        """A worker presumed dead comes back with an old claim: refused unless it still holds the lease."""
        claim = data.draw(st.sampled_from(self.reaped))
        self._score(claim, finish=True)

    # -- time and the sweep ------------------------------------------------------------------------

    @precondition(lambda self: self.client.zcard(self.game.bus.keys.active) > 0)
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        active = [raw.decode() for raw in self.client.zrange(self.game.bus.keys.active, 0, -1)]
        job = data.draw(st.sampled_from(active))
        self.client.zadd(self.game.bus.keys.active, {job: 0}, xx=True)
        for worker in WORKERS:  # whoever held it holds a lease that is gone once swept
            for claim in [c for c in self.held[worker] if c.job == job]:
                self.held[worker].remove(claim)
                self.reaped.append(claim)

    @rule()
    def sweep(self) -> None:
        self.run(self.game.bus.sweep())

    # -- the invariants ----------------------------------------------------------------------------

    def _state(self) -> tuple[invariants.GameState, dict[str, dict[str, str]]]:
        rows = invariants.job_rows(self.client, self.game.bus.keys)
        return invariants.read_game(self.client, self.game.keys, self.round_id, self.players), rows

    @invariant()
    def holds(self) -> None:
        if not self.round_id:
            return
        state, rows = self._state()
        problems = invariants.queue_structure(self.client, self.game.bus.keys, rows)
        once, figures = invariants.exactly_once(state, rows, set())
        problems += [p for p in once if "not scored" not in p]  # unscored is fine until the drain
        problems += invariants.wallets(self.client, self.game.keys, state)
        problems += invariants.leaderboard(state)
        assert not problems, problems
        assert figures["double"] == 0

    def drain(self) -> None:
        """Reap every lease, sweep, and score what is left: every acknowledged guess ends scored once."""
        for _ in range(100):
            for raw in self.client.zrange(self.game.bus.keys.active, 0, -1):
                self.client.zadd(self.game.bus.keys.active, {raw: 0}, xx=True)
            self.run(self.game.bus.sweep())
            claims = self.run(self.game.bus.claim(50, lease_ms=60_000, owner="drain"))
            if not claims:
                break
            for claim in claims:
                self.run(score_worker.handle(self.game, Job(claim)))
        state, rows = self._state()
        problems, figures = invariants.exactly_once(state, rows, self.acknowledged)
        assert not problems, problems
        assert figures == {"lost": 0, "double": 0, "dead": 0, "vanished": 0}
        assert len(state.records) == len(self.acknowledged)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_workers_the_sweep_and_a_producer_interleaved_keep_every_invariant(redis_server):
    url = f"{redis_server.url.rsplit('/', 1)[0]}/{DATABASE}"
    client = redis.Redis.from_url(url)
    loop = asyncio.new_event_loop()

    class Drained(Interleavings):
        def teardown(self) -> None:
            try:
                if self.round_id:
                    self.drain()
            finally:
                super().teardown()

    try:
        run_state_machine_as_test(
            lambda: Drained(url, loop, client),
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
