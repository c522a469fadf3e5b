"""The hypothesis model of the queue with its controls and gates: cancel, revoke, the deletion of dead
letters, pause and resume of the bus or a lane, lane concurrency caps and rate limits (of a lane and of
the bus), each racing the
other scripts in random order on real Redis, checked step by step against a pure Python model.

The model extends tests/integration/test_model.py's: a gate holds a lane out of the ring (``held``), a
capped lane counts its active jobs (rows marked ``K``), a rate window counts the claims made while its
limit is set. Time passes only by the probe: a rate window "passes" when its claims' scores and its
lane's reopen time are moved to 0, as the lease and delay rules move theirs.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule, run_state_machine_as_test

from echomq import Control, Deletion, Rate
from echomq.states import COUNTERS
from echomq.testing.server import RedisProcess
from tests.integration.test_model import LANES, LONG_MS, Model, ModelJob, QueueMachine, _settings


class FlowModel(Model):
    """The queue with gates, as flow.lua, claim.lua and the "gates" include describe it."""

    def __init__(self, trim: bool) -> None:
        super().__init__(trim)
        self.paused = False
        self.paused_lanes: set[str] = set()
        self.caps: dict[str, int] = {}
        self.rates: dict[str, int] = {}  # lane -> n claims per LONG_MS
        self.bus_rate: int | None = None
        self.logs: Counter[str] = Counter()  # lane ('' the bus) -> claims in its window
        self.throttled: dict[str, int] = {}  # lane -> its reopen time: 0 once the window "passed"
        self.held: set[str] = set()
        self.active: Counter[str] = Counter()  # capped lanes' active jobs
        self.capped: set[str] = set()  # jobs counted against a cap ('K')

    @property
    def gated(self) -> bool:
        return bool(self.paused or self.paused_lanes or self.caps or self.rates or self.bus_rate)

    def is_open(self, lane: str) -> bool:
        if lane in self.paused_lanes:
            return False
        if lane in self.caps and self.active[lane] >= self.caps[lane]:
            return False
        return not (lane in self.rates and lane in self.throttled)

    def offer(self, lane: str) -> None:
        if self.gated:
            if lane in self.held:
                return
            if not self.is_open(lane):
                self.held.add(lane)
                return
        super().offer(lane)

    def reopen(self, lane: str) -> bool:
        if not self.is_open(lane) or lane not in self.held:
            return False
        self.held.discard(lane)
        if not self.lanes.get(lane):
            return False
        super().offer(lane)
        return True

    def left_active(self, job: ModelJob) -> None:
        if job.id not in self.capped:
            return
        self.capped.discard(job.id)
        self.active[job.lane] -= 1
        if self.active[job.lane] <= 0:
            del self.active[job.lane]
        self.reopen(job.lane)

    def reopen_due(self) -> None:
        for lane in sorted(lane for lane, at in self.throttled.items() if at == 0):
            del self.throttled[lane]
            self.reopen(lane)

    def after_sweep(self) -> None:
        if self.gated:
            self.reopen_due()
            assert not [lane for lane in self.held if self.is_open(lane) and self.lanes.get(lane)]

    def close(self, lane: str) -> None:
        """The lane at the ring's head leaves it, held."""
        assert self.ring[0] == lane
        self.ring.pop(0)
        del self.since[lane]
        self.held.add(lane)

    def claim(self, count: int, request: str = "") -> list[ModelJob]:
        if request in self.records:
            return self.replay(request)
        if self.gated:
            if self.paused:
                return []
            self.reopen_due()
        out: list[ModelJob] = []
        while len(out) < count and self.ring:
            lane = self.ring[0]
            if self.gated:
                if self.bus_rate is not None and self.logs[""] >= self.bus_rate:
                    break
                closed = lane in self.paused_lanes or (
                    lane in self.caps and self.active[lane] >= self.caps[lane]
                )
                if not closed and lane in self.rates and self.logs[lane] >= self.rates[lane]:
                    closed = True
                    self.throttled[lane] = 1  # in the future until its window "passes"
                if closed:
                    self.close(lane)
                    continue
            self.ring.append(self.ring.pop(0))
            job = self.jobs[self.lanes[lane].pop(0)]
            self.lag_max = max(self.lag_max, self.serial - self.since[lane])
            self.counters["claimed"] += 1
            drained = not self.lanes[lane]
            if drained:
                self.ring.pop()
                del self.lanes[lane], self.since[lane]
            else:
                self.since[lane] = self.serial
            job.state = "active"
            job.attempts += 1
            job.tries += 1
            job.expired = False
            if self.gated and lane in self.caps:
                self.capped.add(job.id)
                self.active[lane] += 1
                if self.active[lane] >= self.caps[lane]:
                    if not drained:
                        self.ring.pop()
                        del self.since[lane]
                    self.held.add(lane)
            if self.gated and lane in self.rates:
                self.logs[lane] += 1
            if self.gated and self.bus_rate is not None:
                self.logs[""] += 1
            out.append(job)
        if request and out:
            self.records[request] = [(job.id, job.attempts) for job in out]
        return out

    def cancel(self, job_id: str) -> Control:
        job = self.jobs[job_id]
        if job.state not in ("queued", "delayed"):  # each call here is a new one (its own request id)
            return Control.REFUSED
        if job.state == "queued":
            queue = self.lanes[job.lane]
            queue.remove(job_id)
            if not queue:
                del self.lanes[job.lane]
                if job.lane in self.ring:
                    self.ring.remove(job.lane)
                    del self.since[job.lane]
        job.state = "dead"
        job.due = False
        self.counters["cancelled"] += 1
        return Control.DONE

    def revoke(self, job_id: str) -> Control:
        job = self.jobs[job_id]
        if job.state != "active":
            return Control.REFUSED
        self.left_active(job)
        job.state = "dead"
        job.expired = False
        self.counters["revocations"] += 1
        return Control.DONE

    def delete_dead(self, job_id: str) -> Deletion:
        job = self.jobs[job_id]
        if job.state != "dead":
            return Deletion.REFUSED
        if job.trimmed:
            return Deletion.ALREADY
        job.trimmed = True
        self.counters["deleted"] += 1
        return Deletion.DELETED

    def pause_lane(self, lane: str) -> None:
        self.paused_lanes.add(lane)
        if lane in self.ring:
            self.ring.remove(lane)
            del self.since[lane]
        self.held.add(lane)

    def resume_lane(self, lane: str) -> None:
        self.paused_lanes.discard(lane)
        self.reopen(lane)

    def reopen_all(self) -> None:
        for lane in sorted(self.held):
            self.reopen(lane)

    def set_cap(self, lane: str, cap: int | None) -> None:
        if cap is None:
            self.caps.pop(lane, None)
        else:
            self.caps[lane] = cap
        self.active.clear()
        self.capped = {j.id for j in self.jobs.values() if j.state == "active" and j.lane in self.caps}
        for job_id in self.capped:
            self.active[self.jobs[job_id].lane] += 1
        self.reopen_all()

    def set_rate(self, lane: str, n: int | None) -> None:
        if n is None:
            self.rates.pop(lane, None)
        else:
            self.rates[lane] = n
        self.throttled.pop(lane, None)
        self.reopen_all()


class FlowMachine(QueueMachine):
    """test_model's machine, its model a FlowModel, with the control and gate rules."""

    def __init__(self, url, loop, client, trim):  # type: ignore[no-untyped-def]
        super().__init__(url, loop, client, trim)
        self.model = FlowModel(trim)

    @property
    def flow(self) -> FlowModel:
        assert isinstance(self.model, FlowModel)
        return self.model

    @precondition(lambda self: self.in_state("queued", "delayed", "active", "done", "dead"))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.in_state("queued", "delayed", "active", "done", "dead")))
        assert self.run(self.bus.cancel(job, "test")) is self.flow.cancel(job)

    @precondition(lambda self: self.in_state("queued", "active", "dead"))
    @rule(data=st.data())
    def revoke(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.in_state("queued", "active", "dead")))
        assert self.run(self.bus.revoke(job, "test")) is self.flow.revoke(job)

    @precondition(lambda self: self.in_state("queued", "active", "done", "dead"))
    @rule(data=st.data())
    def delete_dead(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.in_state("queued", "active", "done", "dead")))
        assert self.run(self.bus.delete_dead(job)) is self.flow.delete_dead(job)

    @rule(lane=st.sampled_from(LANES), pause=st.booleans())
    def pause_or_resume_lane(self, lane: str, pause: bool) -> None:
        if pause:
            self.run(self.bus.pause(lane))
            self.flow.pause_lane(lane)
        else:
            self.run(self.bus.resume(lane))
            self.flow.resume_lane(lane)

    @rule(pause=st.booleans())
    def pause_or_resume_bus(self, pause: bool) -> None:
        self.run(self.bus.pause() if pause else self.bus.resume())
        self.flow.paused = pause

    @rule(lane=st.sampled_from(LANES), cap=st.one_of(st.none(), st.integers(1, 2)))
    def set_cap(self, lane: str, cap: int | None) -> None:
        self.run(self.bus.set_lane_cap(lane, cap))
        self.flow.set_cap(lane, cap)

    @rule(lane=st.sampled_from(LANES), n=st.one_of(st.none(), st.integers(1, 3)))
    def set_lane_rate(self, lane: str, n: int | None) -> None:
        self.run(self.bus.set_rate_limit(None if n is None else Rate(n, LONG_MS), lane=lane))
        self.flow.set_rate(lane, n)

    @rule(n=st.one_of(st.none(), st.integers(2, 6)))
    def set_bus_rate(self, n: int | None) -> None:
        self.run(self.bus.set_rate_limit(None if n is None else Rate(n, LONG_MS)))
        self.flow.bus_rate = n

    @precondition(lambda self: any(self.flow.logs.values()) or self.flow.throttled)
    @rule(data=st.data())
    def window_passes(self, data: st.DataObject) -> None:
        """Simulated time: a rate window's claims move to the epoch, as its lane's reopen time."""
        names = sorted({*(k for k, v in self.flow.logs.items() if v), *self.flow.throttled})
        lane = data.draw(st.sampled_from(names))
        key = f"{self.bus.keys.prefix}rate" + (f":{lane}" if lane else "")
        client = self.probe.client
        for member in client.zrange(key, 0, -1):
            client.zadd(key, {member: 0})
        self.flow.logs[lane] = 0
        if lane in self.flow.throttled:
            client.zadd(self.bus.keys.throttled, {lane: 0}, xx=True)
            self.flow.throttled[lane] = 0

    @precondition(lambda self: 0 in self.flow.throttled.values())
    @rule()
    def sweep_reopens(self) -> None:
        report = self.run(self.bus.sweep())
        assert (report.promoted, report.reclaimed, report.dead, report.trimmed) == self.model.sweep()

    @invariant()
    def gates_match_the_model(self) -> None:
        client, keys = self.probe.client, self.bus.keys
        assert {m.decode() for m in client.smembers(keys.held)} == self.flow.held
        counted = {k.decode(): int(v) for k, v in client.hgetall(keys.lane_active).items()}
        assert counted == dict(self.flow.active)
        assert {m.decode() for m in client.zrange(keys.throttled, 0, -1)} == set(self.flow.throttled)
        counters = self.probe.counters()
        assert {name: counters.get(name, 0) for name in COUNTERS} == {
            name: self.flow.counters[name] for name in COUNTERS
        }


@pytest.fixture(scope="module")
def server():
    with RedisProcess(appendonly=False) as process:
        yield process


@pytest.mark.timeout(400)  # a hang guard: a hundred random runs, longer on a loaded machine
def test_the_controls_and_gates_match_the_model(server):
    """Random runs of every queue script with cancel, revoke, pauses, caps and rates agree with the model."""
    client = redis.Redis.from_url(server.url)
    loop = asyncio.new_event_loop()
    try:
        machine = lambda: FlowMachine(server.url, loop, client, False)  # noqa: E731
        run_state_machine_as_test(machine, settings=_settings(80))
    finally:
        loop.close()
        client.close()
