"""Any delivery order, any number of redeliveries: one board, the admission-order fold of the guesses.

Hypothesis draws a round's admitted guesses (a few players, a few guesses each, sometimes the secret)
and then a delivery story on real Redis through the real claim, sweep and score paths: workers claim
batches, finish their claims in any order with the real handler (``score.lua``), die holding a claim
(its lease runs out, the sweep reaps it, another worker claims it again), die between the effect and
the acknowledgement (``score.lua`` with ``finish=False``, the fault hook, then the same redelivery), or
come back late with a reaped claim (stale). Whatever the story, once every job is done the board, each
player's standing and each record's attempt are the pure fold of the admitted guesses in admission
order (JOB id order) with their admission times, computed here from the admissions alone, and the board
equals :func:`codemojex.leaderboard.recompute` of the records; so does each player's result in the round
kept for their stats (``results:<PLR>``: attempts to solve, 0 unsolved).

Leases are 60 s and never run out by themselves: expiry is simulated (tests/support/probe.py).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codemojex import guesses, leaderboard, players, ranking, rounds, score_worker
from codemojex.engine import score
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.keys import guess_of
from codemojex.payload import decode_payload
from echomq import Bus, Claim, Finish, Job
from tests.support.game import KEYBOARD, SECRET, GameProbe, text

LEASE_MS = 60_000
MAX_STEPS = 80  # then the story ends: every lease is reaped and every job handled in turn
_tags = itertools.count()

GUESSES = st.one_of(
    st.tuples(*[st.sampled_from(KEYBOARD)] * 6),
    st.just(SECRET),
    st.sampled_from([("🍎", "🍑", "🍑", "🍑", "🍑", "🍑"), ("🍑", "🍌", "🍑", "🍑", "🍑", "🍑")]),  # ties
)
ADMISSIONS = st.lists(st.tuples(st.integers(0, 2), GUESSES), min_size=1, max_size=10)
ACTIONS = ("claim", "finish", "finish", "crash_after_effect", "die", "late", "reap")


@dataclass(frozen=True)
class Admitted:
    job: str
    player: str
    guess: tuple[str, ...]
    created_ms: int


def admission_order_fold(
    admitted: list[Admitted],
) -> tuple[dict[str, ranking.Standing], dict[str, tuple[bool, int]]]:
    """The oracle: each player's guesses folded in JOB id order with their admission times; the standings
    and each job's (counted, attempt)."""
    standings: dict[str, ranking.Standing] = {}
    attempts: dict[str, tuple[bool, int]] = {}
    for job in sorted(admitted, key=lambda a: a.job):
        feedback = score(SECRET, job.guess)
        before = standings.get(job.player)
        counted = before is None or not before.solved
        after = ranking.fold(before, job.player, feedback.hits, feedback.nears, job.created_ms)
        standings[job.player] = after
        attempts[job.job] = (counted, after.attempts if counted else 0)
    return standings, attempts


class Story:
    """One round on a fresh tag: the admissions, then a delivery story drawn step by step."""

    def __init__(self, url: str, client: redis.Redis) -> None:
        bus = Bus.from_url(url, tag=f"do{os.getpid()}-{next(_tags)}")
        self.game = Game(bus, GameSettings(grant=(("ticket", 20),), max_attempts=1000))
        self.probe = GameProbe.of(client, self.game)
        self.client = client
        self.round_id = ""
        self.held: list[Claim] = []  # claims of live workers, not finished
        self.dropped: list[Claim] = []  # claims of workers that died or finished: they may come back late

    async def admit(self, plays: list[tuple[int, tuple[str, ...]]]) -> list[Admitted]:
        the_round = await rounds.open_round(self.game, keyboard=list(KEYBOARD), secret=list(SECRET))
        self.round_id = the_round.id
        who = [(await players.register(self.game, f"P{n}")).id for n in range(3)]
        admitted = []
        for index, guess in plays:
            submitted = await guesses.submit(self.game, self.round_id, who[index], text(guess))
            assert submitted.outcome is Outcome.ADMITTED
            created = self.probe.bus.field(submitted.job, "created")
            assert created is not None
            admitted.append(Admitted(submitted.job, who[index], guess, int(created)))
        return admitted

    def active(self) -> list[str]:
        """The active jobs in id order (by deadline, two claims in one millisecond could swap)."""
        return sorted(m.decode() for m in self.client.zrange(self.game.bus.keys.active, 0, -1))

    def queued(self) -> bool:
        return bool(self.client.lrange(self.game.bus.keys.ring, 0, -1))

    async def reap(self, jobs: list[str]) -> None:
        """The leases of ``jobs`` run out and the sweep puts them back in their lanes; a worker still
        holding one stalled past its lease: its claim may come back late."""
        for job in jobs:
            self.probe.bus.expire(job)
        assert (await self.game.bus.sweep()).reclaimed == len(jobs)
        self.dropped += [claim for claim in self.held if claim.job in jobs]
        self.held = [claim for claim in self.held if claim.job not in jobs]

    async def step(self, data: st.DataObject) -> None:
        """One thing a worker (or the sweep) does, drawn among those possible now."""
        possible = [
            action
            for action in ACTIONS
            if (action == "claim" and self.queued())
            or (action in ("finish", "crash_after_effect", "die") and self.held)
            or (action == "late" and self.dropped)
            or (action == "reap" and self.active())
        ]
        action = data.draw(st.sampled_from(possible))
        if action == "claim":
            self.held += await self.game.bus.claim(data.draw(st.integers(1, 4)), lease_ms=LEASE_MS)
        elif action == "reap":
            active = self.active()
            await self.reap(data.draw(st.lists(st.sampled_from(active), min_size=1, unique=True)))
        elif action == "late":
            claim = data.draw(st.sampled_from(self.dropped))
            self.dropped.remove(claim)
            await score_worker.handle(self.game, Job(claim))  # DONE if still current, else STALE
        else:
            claim = data.draw(st.sampled_from(self.held))
            self.held.remove(claim)
            self.dropped.append(claim)
            if action == "finish":
                assert await score_worker.handle(self.game, Job(claim)) is Finish.DONE
            elif action == "crash_after_effect":
                request = decode_payload(claim.payload)
                call = score_worker.score_call(
                    self.game, claim, request, score(SECRET, request.guess), finish=False
                )
                assert int((await self.game.run("score", *call))[0]) == 2  # the effect, no completion

    async def finish_all(self) -> None:
        """The end of the story: whatever is held or active is reaped, and every job is handled."""
        self.dropped += self.held
        self.held = []
        if active := self.active():
            await self.reap(active)
        while claims := await self.game.bus.claim(10, lease_ms=LEASE_MS):
            for claim in claims:
                assert await score_worker.handle(self.game, Job(claim)) is Finish.DONE

    async def aclose(self) -> None:
        await self.game.aclose()
        for pattern in (self.game.bus.keys.pattern, self.game.keys.pattern):
            for key in list(self.client.scan_iter(match=pattern, count=1000)):
                self.client.delete(key)


async def play(
    url: str, client: redis.Redis, plays: list[tuple[int, tuple[str, ...]]], data: st.DataObject
) -> None:
    story = Story(url, client)
    try:
        admitted = await story.admit(plays)
        for _ in range(MAX_STEPS):
            if not (story.queued() or story.held or story.active()):
                break
            await story.step(data)
        await story.finish_all()
        game, round_id = story.game, story.round_id

        states = {a.job: (await game.bus.inspect(a.job)).state.value for a in admitted}
        assert set(states.values()) == {"done"}
        records = await leaderboard.scored_records(game, round_id)
        assert int(client.hget(game.keys.latency, "count") or 0) == len(admitted)  # each effect once

        standings, attempts = admission_order_fold(admitted)
        board = [entry.standing for entry in await leaderboard.read_board(game, round_id)]
        assert board == ranking.rank(standings.values())
        assert {record.job: (record.counted, record.attempt) for record in records} == attempts
        assert board == leaderboard.recompute(records)
        for player, standing in standings.items():
            assert story.probe.standing(round_id, player) == standing
            assert story.probe.played(round_id, player) == sorted(
                guess_of(a.job) for a in admitted if a.player == player
            )
        assert [record.id for record in records] == sorted(guess_of(a.job) for a in admitted)
        for player, standing in standings.items():  # the stats' per-round result: the same fold
            result = client.hget(game.keys.results(player), round_id)
            assert result == str(standing.attempts if standing.solved else 0).encode()
    finally:
        await story.aclose()


@pytest.mark.slow
@pytest.mark.timeout(600)  # room for hypothesis to shrink a failure to a short story
def test_any_delivery_order_and_any_redeliveries_give_the_admission_order_board(redis_server, sync_redis):
    """The same admitted guesses, scored in random orders with random redeliveries, crashes between the
    effect and the acknowledgement and stale late finishes, always give the board, attempts and tie-break
    times of the admission-order fold, which is also leaderboard.recompute of the records."""
    loop = asyncio.new_event_loop()

    @settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(plays=ADMISSIONS, data=st.data())
    def story(plays: list[tuple[int, tuple[str, ...]]], data: st.DataObject) -> None:
        loop.run_until_complete(play(redis_server.url, sync_redis, plays, data))

    try:
        story()
    finally:
        loop.close()
