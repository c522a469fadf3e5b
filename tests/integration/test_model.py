"""A hypothesis state machine drives the real scripts on real Redis against a pure Python model.

The model is the oracle: it knows, for every admitted job, its state, lane position, attempts token and
tries; the order of the ring; every counter; and each lane's fairness lag. After every step the real
Redis state must match it exactly, and both queue invariants must hold. Time never passes in the model:
leases and delays are long (10 min), and expiry is simulated by moving a score in ``active`` or
``delayed`` to 0 (see tests/support/probe.py), which the sweep then treats as past on the server clock.

A second run uses a bus that keeps done rows for 0 ms, so every sweep and every complete trims them
(the complete two at most), and tombstones meet every other rule.
Each example runs on a fresh bus tag; one event loop, owned by the test, runs every Bus call.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
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

from echomq import Admission, Bus, Claim, Effects, Failure, Finish, Lease, NewJob, Release, Settings, ids
from echomq.states import COUNTERS
from echomq.testing.invariants import job_rows
from echomq.testing.server import RedisProcess
from tests.support.probe import Probe

LANES = ("a", "b", "c")
PAYLOADS = (b"x", b"y")
PRIORITIES = (-1, 0, 1)
LONG_MS = 600_000  # leases and delays that never pass on their own during a test

T = TypeVar("T")
_tags = itertools.count()


@dataclass
class ModelJob:
    id: str
    lane: str
    payload: bytes
    priority: int
    max_attempts: int
    state: str
    attempts: int = 0
    tries: int = 0
    expired: bool = False  # active, with its deadline forced into the past
    due: bool = False  # delayed, with its due time forced into the past
    trimmed: bool = False  # done, and reduced to its tombstone by a sweep or a later complete
    finished: int = 0  # done: its finish time (server ms, read from the row: the model has no clock)
    ended: list[tuple[int, str]] = field(default_factory=list)  # fail/release endings, newest first


ENDED_KEPT = 4  # as the "ended" Lua include: how many fail/release endings a row remembers


class Model:
    """The queue as the design describes it, with no Redis and no clock.

    With ``trim``, the bus keeps done rows for 0 ms, so every sweep trims them to tombstones, and every
    complete first trims the two oldest (by finish time, then id) of the done rows before its own.
    """

    def __init__(self, trim: bool) -> None:
        self.trim = trim
        self.jobs: dict[str, ModelJob] = {}
        self.lanes: dict[str, list[str]] = {}  # non-empty lanes only, in claim order
        self.ring: list[str] = []
        self.since: dict[str, int] = {}  # lane -> the claim serial since which it waits for service
        self.counters: Counter[str] = Counter()
        self.lag_max = 0
        self.completed: set[str] = set()
        self.records: dict[str, list[tuple[str, int]]] = {}  # claim request id -> (job, token) claimed

    @property
    def serial(self) -> int:
        return self.counters["claimed"]

    def is_current(self, claim: Claim) -> bool:
        job = self.jobs[claim.job]
        return job.state == "active" and job.attempts == claim.token

    def to_lane(self, job: ModelJob) -> None:
        job.state = "queued"
        job.expired = job.due = False
        queue = self.lanes.setdefault(job.lane, [])
        queue.append(job.id)
        queue.sort(key=lambda j: (self.jobs[j].priority, j))
        if len(queue) == 1:
            self.offer(job.lane)

    def offer(self, lane: str) -> None:
        """A lane that just got its first queued job joins the ring (a gate may hold it: test_model_flow)."""
        self.ring.append(lane)
        self.since[lane] = self.serial

    def left_active(self, job: ModelJob) -> None:
        """A job just left active (a lane cap frees its place: test_model_flow)."""

    def enqueue(self, job: ModelJob, delayed: bool) -> None:
        self.jobs[job.id] = job
        self.counters["admitted"] += 1
        if delayed:
            job.state = "delayed"
        else:
            self.to_lane(job)

    def ended_as(self, claim: Claim) -> str | None:
        """How this claim ended the job, while the row keeps its ``ended`` words (a tombstone keeps none)."""
        job = self.jobs[claim.job]
        return None if job.trimmed else dict(job.ended).get(claim.token)

    def end(self, job: ModelJob, how: str) -> None:
        job.ended = [(job.attempts, how), *job.ended][:ENDED_KEPT]

    def replay(self, request: str) -> list[ModelJob]:
        """A retried claim: the recorded jobs still active under their tokens, leases renewed."""
        out = []
        for job_id, token in self.records[request]:
            job = self.jobs[job_id]
            if job.state == "active" and job.attempts == token:
                job.expired = False
                out.append(job)
        self.counters["replayed"] += len(out)
        return out

    def claim(self, count: int, request: str = "") -> list[ModelJob]:
        if request in self.records:
            return self.replay(request)
        out = []
        while len(out) < count and self.ring:
            lane = self.ring.pop(0)
            self.ring.append(lane)
            job = self.jobs[self.lanes[lane].pop(0)]
            self.lag_max = max(self.lag_max, self.serial - self.since[lane])
            self.counters["claimed"] += 1
            if self.lanes[lane]:
                self.since[lane] = self.serial
            else:
                self.ring.pop()
                del self.lanes[lane], self.since[lane]
            job.state = "active"
            job.attempts += 1
            job.tries += 1
            job.expired = False
            out.append(job)
        if request and out:
            self.records[request] = [(job.id, job.attempts) for job in out]
        return out

    def complete(self, claim: Claim, finished: int = 0) -> Finish:
        held = self.jobs[claim.job]
        if held.state == "done" and held.attempts == claim.token:
            return Finish.DONE  # a retry: this very claim completed it; nothing counted
        if not self.is_current(claim):
            self.counters["stale"] += 1
            return Finish.STALE
        assert claim.job not in self.completed, "the model would finish a job twice"
        if self.trim:
            for job in sorted(self.untrimmed_done(), key=lambda j: (j.finished, j.id))[:2]:
                job.trimmed = True
                self.counters["trimmed"] += 1
        self.jobs[claim.job].state = "done"
        self.jobs[claim.job].finished = finished
        self.completed.add(claim.job)
        self.counters["completed"] += 1
        self.left_active(self.jobs[claim.job])
        return Finish.DONE

    def fail(self, claim: Claim, retryable: bool, delay_ms: int) -> Failure:
        if not self.is_current(claim):
            how = self.ended_as(claim)
            if how in ("q", "x"):  # a retry: this very claim's fail landed; nothing counted
                return Failure.RETRYING if how == "q" else Failure.DEAD
            self.counters["stale"] += 1
            return Failure.STALE
        job = self.jobs[claim.job]
        self.left_active(job)
        if not retryable or job.tries >= job.max_attempts:
            job.state = "dead"
            self.end(job, "x")
            self.counters["dead"] += 1
            return Failure.DEAD
        self.end(job, "q")
        self.counters["retried"] += 1
        if delay_ms:
            job.state = "delayed"
            job.due = False
        else:
            self.to_lane(job)
        return Failure.RETRYING

    def extend(self, claim: Claim) -> Lease:
        job = self.jobs[claim.job]
        if job.state == "done" and job.attempts == claim.token:
            return Lease.FINISHED  # this claim completed it: not a revocation, nothing counted
        if not self.is_current(claim):
            self.counters["revoked"] += 1
            return Lease.REVOKED
        self.jobs[claim.job].expired = False
        self.counters["extended"] += 1
        return Lease.EXTENDED

    def release(self, claim: Claim) -> Release:
        if not self.is_current(claim):
            if self.ended_as(claim) == "r":  # a retry: this very claim's release landed
                return Release.RELEASED
            self.counters["stale"] += 1
            return Release.STALE
        job = self.jobs[claim.job]
        self.end(job, "r")
        job.tries -= 1
        self.to_lane(job)
        self.left_active(job)
        self.counters["released"] += 1
        return Release.RELEASED

    def retry_dead(self, job_id: str) -> bool:
        job = self.jobs[job_id]
        if job.state != "dead" or job.trimmed:  # a deleted dead letter's tombstone has no payload left
            return False
        job.tries = 0
        self.to_lane(job)
        self.counters["resurrected"] += 1
        return True

    def sweep(self) -> tuple[int, int, int, int]:
        # Forced scores are all 0, so the real sweep takes them in member (id) order.
        promoted = sorted(j.id for j in self.jobs.values() if j.state == "delayed" and j.due)
        for job_id in promoted:
            self.to_lane(self.jobs[job_id])
        reclaimed = dead = 0
        for job_id in sorted(j.id for j in self.jobs.values() if j.state == "active" and j.expired):
            job = self.jobs[job_id]
            self.left_active(job)
            if job.tries >= job.max_attempts:
                job.state = "dead"
                dead += 1
            else:
                self.to_lane(job)
                reclaimed += 1
        trimmed = self.untrimmed_done() if self.trim else []
        for job in trimmed:
            job.trimmed = True
        self.after_sweep()
        self.counters["promoted"] += len(promoted)
        self.counters["reclaimed"] += reclaimed
        self.counters["dead"] += dead
        self.counters["trimmed"] += len(trimmed)
        return len(promoted), reclaimed, dead, len(trimmed)

    def after_sweep(self) -> None:
        """The sweep's last step (reopening throttled lanes: test_model_flow)."""

    def untrimmed_done(self) -> list[ModelJob]:
        return [j for j in self.jobs.values() if j.state == "done" and not j.trimmed]

    def sweep_has_work(self) -> bool:
        return any(
            j.expired or j.due or (self.trim and j.state == "done" and not j.trimmed)
            for j in self.jobs.values()
        )


class QueueMachine(RuleBasedStateMachine):
    """Random operations on one bus, each checked against the model."""

    def __init__(self, url: str, loop: asyncio.AbstractEventLoop, client: Any, trim: bool) -> None:
        super().__init__()
        self.loop = loop
        bus_settings = Settings(result_ttl_ms=0, dedup_window_ms=LONG_MS) if trim else Settings()
        self.bus = Bus.from_url(url, tag=f"model-{os.getpid()}-{next(_tags)}", settings=bus_settings)
        self.probe = Probe(client, self.bus.keys)
        self.model = Model(trim)
        self.claims: list[Claim] = []
        self.requests = itertools.count()
        self.applied: Counter[str] = Counter()  # job -> the effects its completions should have applied

    def effects(self, claim: Claim) -> Effects:
        """A complete's effects (echomq.effects): count the job in a key of the application's."""
        return Effects().incrby(f"app:{{{self.bus.tag}}}:fx:{claim.job}", 1)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.bus.aclose())

    # -- choosing from the model's state --------------------------------------------------------

    def current(self) -> list[Claim]:
        return [c for c in self.claims if self.model.is_current(c)]

    def stale(self) -> list[Claim]:
        return [c for c in self.claims if not self.model.is_current(c)]

    def in_state(self, *states: str) -> list[str]:
        return sorted(j.id for j in self.model.jobs.values() if j.state in states)

    # -- admission ------------------------------------------------------------------------------

    @initialize(
        specs=st.lists(
            st.tuples(
                st.sampled_from(LANES),
                st.sampled_from(PAYLOADS),
                st.sampled_from(PRIORITIES),
                st.integers(1, 3),
                st.booleans(),
            ),
            min_size=1,
            max_size=8,
        )
    )
    def enqueue_batch(self, specs: list[tuple[str, bytes, int, int, bool]]) -> None:
        new = [
            ModelJob(ids.mint("JOB"), lane, payload, priority, max_attempts, "queued")
            for lane, payload, priority, max_attempts, _ in specs
        ]
        admissions = self.run(
            self.bus.enqueue_many(
                [
                    NewJob(job.id, job.lane, job.payload, job.max_attempts, job.priority, LONG_MS * delayed)
                    for job, (*_, delayed) in zip(new, specs, strict=True)
                ]
            )
        )
        assert admissions == [Admission.ADMITTED] * len(new)
        for job, (*_, delayed) in zip(new, specs, strict=True):
            self.model.enqueue(job, delayed)

    @rule(
        lane=st.sampled_from(LANES),
        payload=st.sampled_from(PAYLOADS),
        priority=st.sampled_from(PRIORITIES),
        max_attempts=st.integers(1, 3),
        delayed=st.booleans(),
    )
    def enqueue_new(self, lane: str, payload: bytes, priority: int, max_attempts: int, delayed: bool) -> None:
        job = ids.mint("JOB")
        admission = self.run(
            self.bus.enqueue(
                job,
                lane=lane,
                payload=payload,
                max_attempts=max_attempts,
                priority=priority,
                delay_ms=LONG_MS if delayed else 0,
            )
        )
        assert admission is Admission.ADMITTED
        self.model.enqueue(ModelJob(job, lane, payload, priority, max_attempts, "queued"), delayed)

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data(), priority=st.sampled_from(PRIORITIES), delayed=st.booleans())
    def enqueue_duplicate(self, data: st.DataObject, priority: int, delayed: bool) -> None:
        job = self.model.jobs[data.draw(st.sampled_from(sorted(self.model.jobs)))]
        before = self.probe.snapshot()
        admission = self.run(
            self.bus.enqueue(
                job.id, lane=job.lane, payload=job.payload, priority=priority, delay_ms=LONG_MS * delayed
            )
        )
        assert admission is Admission.DUPLICATE
        self.model.counters["duplicate"] += 1
        self.probe.assert_unchanged(before, duplicate=1)

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data(), change=st.sampled_from(("lane", "payload", "both")))
    def enqueue_conflict(self, data: st.DataObject, change: str) -> None:
        job = self.model.jobs[data.draw(st.sampled_from(sorted(self.model.jobs)))]
        lane = (
            data.draw(st.sampled_from([x for x in LANES if x != job.lane]))
            if change != "payload"
            else job.lane
        )
        payload = job.payload if change == "lane" else job.payload + b"!"
        before = self.probe.snapshot()
        assert self.run(self.bus.enqueue(job.id, lane=lane, payload=payload)) is Admission.CONFLICT
        self.model.counters["conflict"] += 1
        self.probe.assert_unchanged(before, conflict=1)

    # -- the claim and the finish ---------------------------------------------------------------

    @rule(count=st.integers(1, 3))
    def claim(self, count: int) -> None:
        request = f"r{next(self.requests)}"
        real = self.run(self.bus.claim(count=count, lease_ms=LONG_MS, request=request))
        expected = self.model.claim(count, request)
        assert [(c.job, c.lane, c.token, c.tries, c.max_attempts, c.payload) for c in real] == [
            (j.id, j.lane, j.attempts, j.tries, j.max_attempts, j.payload) for j in expected
        ]
        self.claims.extend(real)

    @precondition(lambda self: self.model.records)
    @rule(data=st.data(), count=st.integers(1, 3))
    def claim_retried(self, data: st.DataObject, count: int) -> None:
        """A claim retried with its request id (its reply lost): the same jobs, no new try."""
        request = data.draw(st.sampled_from(sorted(self.model.records)))
        real = self.run(self.bus.claim(count=count, lease_ms=LONG_MS, request=request))
        expected = self.model.claim(count, request)
        assert [(c.job, c.lane, c.token, c.tries, c.max_attempts, c.payload) for c in real] == [
            (j.id, j.lane, j.attempts, j.tries, j.max_attempts, j.payload) for j in expected
        ]

    @precondition(lambda self: self.current())
    @rule(data=st.data(), with_effects=st.booleans())
    def complete_current(self, data: st.DataObject, with_effects: bool) -> None:
        claim = data.draw(st.sampled_from(self.current()))
        effects = self.effects(claim) if with_effects else None
        outcome = self.run(self.bus.complete(claim, b"result", effects=effects))
        finished = int(self.probe.field(claim.job, "finished") or 0)
        assert outcome is self.model.complete(claim, finished) is Finish.DONE
        self.applied[claim.job] += with_effects

    @precondition(lambda self: self.stale())
    @rule(data=st.data(), with_effects=st.booleans())
    def complete_stale(self, data: st.DataObject, with_effects: bool) -> None:
        claim = data.draw(st.sampled_from(self.stale()))
        before = self.probe.snapshot()
        effects = self.effects(claim) if with_effects else None  # never applied: stale, or a retry
        outcome = self.run(self.bus.complete(claim, b"late", effects=effects))
        assert outcome is self.model.complete(claim)  # DONE: a retry of the claim that completed it
        self.probe.assert_unchanged(before, **({"stale": 1} if outcome is Finish.STALE else {}))

    @precondition(lambda self: self.current())
    @rule(data=st.data(), mode=st.sampled_from(("now", "later", "permanent")))
    def fail_current(self, data: st.DataObject, mode: str) -> None:
        claim = data.draw(st.sampled_from(self.current()))
        retryable = mode != "permanent"
        delay_ms = LONG_MS if mode == "later" else 0
        outcome = self.run(self.bus.fail(claim, f"boom {mode}", retryable=retryable, delay_ms=delay_ms))
        assert outcome is self.model.fail(claim, retryable, delay_ms)

    @precondition(lambda self: self.stale())
    @rule(data=st.data(), retryable=st.booleans())
    def fail_stale(self, data: st.DataObject, retryable: bool) -> None:
        claim = data.draw(st.sampled_from(self.stale()))
        before = self.probe.snapshot()
        outcome = self.run(self.bus.fail(claim, "late", retryable=retryable, delay_ms=0))
        assert outcome is self.model.fail(claim, retryable, 0)  # not STALE: a retry of its own fail
        self.probe.assert_unchanged(before, **({"stale": 1} if outcome is Failure.STALE else {}))

    @precondition(lambda self: self.current())
    @rule(data=st.data())
    def extend_current(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(self.current()))
        assert self.run(self.bus.extend(claim, LONG_MS)) is self.model.extend(claim) is Lease.EXTENDED

    @precondition(lambda self: self.stale())
    @rule(data=st.data())
    def extend_stale(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(self.stale()))
        before = self.probe.snapshot()
        outcome = self.run(self.bus.extend(claim, LONG_MS))
        assert outcome is self.model.extend(claim)
        assert outcome in (Lease.REVOKED, Lease.FINISHED)
        self.probe.assert_unchanged(before, **({"revoked": 1} if outcome is Lease.REVOKED else {}))

    @precondition(lambda self: self.current())
    @rule(data=st.data())
    def release_current(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(self.current()))
        assert self.run(self.bus.release(claim)) is self.model.release(claim) is Release.RELEASED

    @precondition(lambda self: self.stale())
    @rule(data=st.data())
    def release_stale(self, data: st.DataObject) -> None:
        claim = data.draw(st.sampled_from(self.stale()))
        before = self.probe.snapshot()
        outcome = self.run(self.bus.release(claim))
        assert outcome is self.model.release(claim)  # RELEASED: a retry of its own release
        self.probe.assert_unchanged(before, **({"stale": 1} if outcome is Release.STALE else {}))

    # -- time, simulated, and the sweep ---------------------------------------------------------

    @precondition(lambda self: any(j.state == "active" and not j.expired for j in self.model.jobs.values()))
    @rule(data=st.data())
    def lease_expires(self, data: st.DataObject) -> None:
        live = sorted(j.id for j in self.model.jobs.values() if j.state == "active" and not j.expired)
        job = data.draw(st.sampled_from(live))
        self.probe.expire(job)
        self.model.jobs[job].expired = True

    @precondition(lambda self: any(j.state == "delayed" and not j.due for j in self.model.jobs.values()))
    @rule(data=st.data())
    def delay_passes(self, data: st.DataObject) -> None:
        waiting = sorted(j.id for j in self.model.jobs.values() if j.state == "delayed" and not j.due)
        job = data.draw(st.sampled_from(waiting))
        self.probe.make_due(job)
        self.model.jobs[job].due = True

    @precondition(lambda self: self.model.sweep_has_work())
    @rule()
    def sweep(self) -> None:
        report = self.run(self.bus.sweep())
        assert (report.promoted, report.reclaimed, report.dead, report.trimmed) == self.model.sweep()
        assert report.swept is True

    # -- the dead-letter set --------------------------------------------------------------------

    def dead_letters(self) -> list[str]:
        """Dead jobs whose row is whole (a deleted dead letter is a tombstone: nothing to retry)."""
        return sorted(j.id for j in self.model.jobs.values() if j.state == "dead" and not j.trimmed)

    @precondition(lambda self: self.dead_letters())
    @rule(data=st.data())
    def retry_dead(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.dead_letters()))
        assert self.run(self.bus.retry_dead(job)) is self.model.retry_dead(job) is True

    def not_dead_letters(self) -> list[str]:
        every = self.in_state("queued", "delayed", "active", "done", "dead")
        return sorted(set(every) - set(self.dead_letters()))

    @precondition(lambda self: self.not_dead_letters())
    @rule(data=st.data())
    def retry_not_dead(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.not_dead_letters()))
        before = self.probe.snapshot()
        assert self.run(self.bus.retry_dead(job)) is self.model.retry_dead(job) is False
        self.probe.assert_unchanged(before)

    # -- after every step -----------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        model = self.model
        # Both invariants, and no job lost: every admitted id has a row in the state the model says.
        assert self.probe.check() == {job.id: job.state for job in model.jobs.values()}
        # A tombstone keeps the attempts (the last token), not the tries.
        table = job_rows(self.probe.client, self.bus.keys)
        rows = [table[job.id] for job in model.jobs.values()]
        assert [
            (int(r["attempts"]), "trimmed" in r, None if "trimmed" in r else int(r["tries"])) for r in rows
        ] == [(j.attempts, j.trimmed, None if j.trimmed else j.tries) for j in model.jobs.values()]
        assert {lane: self.probe.lane(lane) for lane in LANES} == {
            lane: model.lanes.get(lane, []) for lane in LANES
        }
        assert self.probe.ring() == model.ring
        # None finished twice: the completed counter is the number of distinct completions.
        counters = self.probe.counters()
        assert {name: counters.get(name, 0) for name in COUNTERS} == {
            name: model.counters[name] for name in COUNTERS
        }
        assert counters.get("completed", 0) == len(model.completed)
        # Effects with the completion: applied once by the claim that completed the job, never otherwise.
        applied = {
            key.decode().rsplit(":", 1)[1]: int(value or 0)
            for key in self.probe.client.scan_iter(match=f"app:{{{self.bus.tag}}}:fx:*")
            for value in [self.probe.client.get(key)]
        }
        assert applied == {job: n for job, n in self.applied.items() if n}
        stats = self.run(self.bus.stats())
        assert [(s.lane, s.depth, s.lag) for s in stats.lanes] == [
            (lane, len(model.lanes[lane]), model.serial - model.since[lane]) for lane in model.ring
        ]
        assert stats.lag_max == model.lag_max


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


@pytest.fixture(scope="module")
def server():
    """A server of this module's own: the invariants SCAN the keyspace after every step."""
    with RedisProcess(appendonly=False) as process:
        yield process


def _run(server: RedisProcess, trim: bool, examples: int) -> None:
    client = redis.Redis.from_url(server.url)
    loop = asyncio.new_event_loop()
    try:
        run_state_machine_as_test(
            lambda: QueueMachine(server.url, loop, client, trim), settings=_settings(examples)
        )
    finally:
        loop.close()
        client.close()


def test_the_scripts_match_the_model(server):
    """Random enqueue/claim/complete/fail/extend/release/expiry/sweep/retry runs agree with the model."""
    _run(server, trim=False, examples=80)


def test_the_scripts_match_the_model_when_done_rows_are_trimmed(server):
    """The same runs agree with the model when every sweep trims done rows to their tombstones."""
    _run(server, trim=True, examples=40)
