"""Seeded random schedules of every script that touches flow control, against a real Redis.

Each schedule interleaves enqueues, claims (some replayed under their request id, as after a lost
reply), completes, fails, releases, reaped leases, revokes, cancels, dead-letter retries, sweeps and
promotions with pauses, caps and rate limits changed at random, and checks after every step what must
always hold: the queue's invariants, the gates' (:func:`echomq.testing.invariants.gate_state`: no lane
held with jobs unless a gate of it is closed), no claim that takes a lane past its cap, no rate window
holding more claims than its count (by the rows' ``claimed_at``, server clock), and the fairness lag of
lanes that are open. At the end every gate is cleared and the bus drained: every job that was not
cancelled, revoked or failed for good completes. No timing is asserted: short sleeps only let rate
windows pass, and every check holds whatever the timing.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from echomq import NewJob, Rate, ids
from echomq.testing.invariants import gate_state

LANES = ("A", "B", "C", "D")
STEPS = 250
OPS = (
    ["enqueue"] * 4
    + ["claim"] * 4
    + ["complete"] * 2
    + ["fail", "release", "expire", "revoke", "cancel", "retry_dead", "retry_all", "enqueue_many"]
    + ["pause", "resume", "cap", "rate", "sleep", "sweep", "promote"]
)


class Schedule:
    def __init__(self, bus, probe, seed: int) -> None:
        self.bus, self.probe, self.client, self.keys = bus, probe, probe.client, bus.keys
        self.rng = random.Random(seed)
        self.claims: dict = {}
        self.jobs: list[str] = []
        self.windows: dict[tuple[str, str], list[int]] = {}  # (lane or '', rate) -> claim times
        self.steps = 0

    def flow(self) -> dict[str, str]:
        return {k.decode(): v.decode() for k, v in self.client.hgetall(self.keys.flow).items()}

    def check_claims(self, claims) -> None:
        settings = self.flow()
        for claim in claims:
            self.claims[claim.job] = claim
            cap = settings.get(f"cap:{claim.lane}") or settings.get("cap:*")
            if cap is not None:
                active = int(self.client.hget(self.keys.lane_active, claim.lane) or 0)
                assert active <= int(cap), f"lane {claim.lane}: {active} active, cap {cap}"
            at = int(self.client.hget(self.keys.job(claim.job), "c"))
            lane_rate = settings.get(f"rate:{claim.lane}") or settings.get("rate:*")
            for whose, rate in ((claim.lane, lane_rate), ("", settings.get("rate"))):
                if rate is None:
                    continue
                count, per_ms = map(int, rate.split(":"))
                times = self.windows.setdefault((whose, rate), [])
                times.append(at)
                window = [t for t in times if at - per_ms < t <= at]
                assert len(window) <= count, f"rate {rate} of {whose or 'the bus'}: claims at {window}"

    async def step(self) -> None:
        bus, rng, op = self.bus, self.rng, self.rng.choice(OPS)
        if op == "enqueue":
            job = ids.mint("JOB")
            self.jobs.append(job)
            await bus.enqueue(
                job, lane=rng.choice(LANES), payload=b"", delay_ms=rng.choice([0, 0, 5]), max_attempts=2
            )
        elif op == "enqueue_many":
            minted = [ids.mint("JOB") for _ in range(rng.randint(1, 4))]
            self.jobs.extend(minted)
            await bus.enqueue_many([NewJob(job, rng.choice(LANES), b"", max_attempts=2) for job in minted])
        elif op == "claim":
            request = f"r{self.steps}"
            count = rng.choice([1, 2, 5])
            claims = await bus.claim(count=count, lease_ms=60_000, request=request)
            self.check_claims(claims)
            if claims and rng.random() < 0.3:  # the retry of a claim whose reply was lost
                again = await bus.claim(count=count, lease_ms=60_000, request=request)
                assert sorted(c.job for c in again) == sorted(c.job for c in claims)
        elif op in ("complete", "fail", "release", "expire", "revoke") and self.claims:
            claim = self.claims.pop(rng.choice(sorted(self.claims)))
            if op == "complete":
                await bus.complete(claim, b"")
            elif op == "fail":
                await bus.fail(claim, "x", delay_ms=rng.choice([0, 3]), retryable=rng.random() < 0.8)
            elif op == "release":
                await bus.release(claim)
            elif op == "revoke":
                await bus.revoke(claim.job)
            else:
                self.probe.expire(claim.job)
                await bus.sweep()
        elif op == "cancel" and self.jobs:
            await bus.cancel(rng.choice(self.jobs))
        elif op == "retry_dead" and self.jobs:
            await bus.retry_dead(rng.choice(self.jobs))
        elif op == "retry_all":
            await bus.retry_all_dead()
        elif op == "pause":
            await bus.pause(rng.choice([*LANES, None]))
        elif op == "resume":
            await bus.resume(rng.choice([*LANES, None]))
        elif op == "cap":
            await bus.set_lane_cap(rng.choice([*LANES, "*"]), rng.choice([None, 1, 2, 3]))
        elif op == "rate":
            rate = rng.choice([None, Rate(1, 40), Rate(2, 60), Rate(3, 100)])
            await bus.set_rate_limit(rate, lane=rng.choice([*LANES, "*", None]))
            self.windows.clear()  # claims under an earlier setting are not this rate's
        elif op == "sleep":
            await asyncio.sleep(rng.choice([0.005, 0.02, 0.05]))
        elif op == "sweep":
            await bus.sweep()
        elif op == "promote":
            for job in self.client.zrange(self.keys.delayed, 0, -1):
                self.probe.make_due(job.decode())
            await bus.sweep()
        self.steps += 1
        assert gate_state(self.client, self.keys) == [], f"after step {self.steps} ({op})"
        lag = int(self.probe.counters().get("lag_max", 0))
        assert lag < len(LANES), f"a lane waited {lag} claims behind {len(LANES) - 1} others"

    async def drain(self) -> None:
        """Clear every gate, return every lease and due job, and complete what is left."""
        bus, settings = self.bus, await self.bus.flow_settings()
        await bus.resume()
        for lane in settings.paused_lanes:
            await bus.resume(lane)
        for lane in settings.caps:
            await bus.set_lane_cap(lane, None)
        for lane in settings.rates:
            await bus.set_rate_limit(None, lane=lane)
        await bus.set_rate_limit(None)
        for _ in range(100):
            for name in ("active", "delayed"):
                for job in self.client.zrange(getattr(self.keys, name), 0, -1):
                    self.client.zadd(getattr(self.keys, name), {job: 0}, xx=True)
            await bus.sweep()
            claims = await bus.claim(count=20)
            for claim in claims:
                await bus.complete(claim, b"")
            idle = self.client.zcard(self.keys.active) == self.client.zcard(self.keys.delayed) == 0
            if not claims and idle:
                break


@pytest.mark.parametrize("seed", range(4))
async def test_a_random_schedule_of_gates_and_finishes_keeps_every_job(bus, probe, seed):
    schedule = Schedule(bus, probe, seed)
    for _ in range(STEPS):
        await schedule.step()
    await schedule.drain()
    states = probe.check()
    assert gate_state(probe.client, bus.keys) == []
    left = {job: state for job, state in states.items() if state not in ("done", "dead")}
    assert left == {}
    assert probe.client.scard(bus.keys.held) == 0
    for job, state in states.items():
        if state == "dead":  # only what a step dead-lettered: cancelled, revoked or failed for good
            error = probe.row(job)["error"].decode()
            assert error.startswith(("cancelled", "revoked", "x", "lease expired")), error
