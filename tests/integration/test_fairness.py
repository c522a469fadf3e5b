"""Fair service across lanes: one deep lane cannot starve the others (the masher of the seed).

One lane holds 10,000 jobs and was filled first; 100 lanes hold one job each. The ring rotation must
serve every one of the 100 within the first 101 claims, one by one or in batches, and the fairness lag
that stats reports must stay within the number of lanes, however deep the heavy lane is.
"""

from __future__ import annotations

import pytest
import redis

from echomq import Admission, Bus, NewJob, ids
from echomq.testing.server import RedisProcess
from tests.support.probe import Probe

HEAVY = 10_000
LIGHT = 100
LANES = LIGHT + 1
CHUNK = 1_000


@pytest.fixture(scope="module")
def server():
    """A server of this module's own, so the 30,000 rows made here do not slow other tests' SCANs."""
    with RedisProcess(appendonly=False) as process:
        yield process


@pytest.fixture
async def bus(server, tag):
    """A bus on this module's server."""
    the_bus = Bus.from_url(server.url, tag=tag)
    yield the_bus
    await the_bus.aclose()


@pytest.fixture
def sync_redis(server):
    """A blocking client on this module's server."""
    client = redis.Redis.from_url(server.url)
    yield client
    client.close()


@pytest.fixture
async def loaded(bus, sync_redis):
    """The bus with the heavy lane filled first, then one job on each of the 100 light lanes."""
    heavy = [ids.mint("JOB") for _ in range(HEAVY)]
    for start in range(0, HEAVY, CHUNK):
        chunk = heavy[start : start + CHUNK]
        assert await bus.enqueue_many([NewJob(job, "heavy", b"") for job in chunk]) == (
            [Admission.ADMITTED] * len(chunk)
        )
    light = {ids.mint("JOB"): f"light-{n:03d}" for n in range(LIGHT)}
    assert await bus.enqueue_many([NewJob(job, lane, b"") for job, lane in light.items()]) == (
        [Admission.ADMITTED] * LIGHT
    )
    probe = Probe(sync_redis, bus.keys)
    assert probe.ring()[0] == "heavy"
    assert len(probe.ring()) == LANES
    return probe, set(light)


async def test_every_light_lane_is_served_within_the_first_101_single_claims(bus, loaded):
    """With 10,000 jobs ahead on one lane, each of 100 one-job lanes is claimed in the first 101 claims."""
    probe, light = loaded
    claimed = []
    for _ in range(LANES):
        [claim] = await bus.claim()
        claimed.append(claim.job)
    assert light <= set(claimed)
    assert sum(1 for job in claimed if job not in light) == 1  # the heavy lane got its one turn
    assert probe.ring() == ["heavy"]
    stats = await bus.stats()
    assert stats.lag_max <= LANES
    states = probe.check()
    assert sum(1 for s in states.values() if s == "active") == LANES


async def test_every_light_lane_is_served_within_the_first_101_batch_claims(bus, loaded):
    """Batch claims of 10 keep the rotation: the first 101 jobs claimed include all 100 light lanes."""
    probe, light = loaded
    claimed = []
    while len(claimed) < LANES:
        batch = await bus.claim(count=min(10, LANES - len(claimed)))
        claimed.extend(c.job for c in batch)
    assert len(claimed) == LANES
    assert light <= set(claimed)
    assert probe.ring() == ["heavy"]
    assert (await bus.stats()).lag_max <= LANES
    probe.check()


async def test_fairness_lag_stays_within_the_number_of_lanes(bus, loaded):
    """While the lanes drain, every lane's reported lag, and the high-water mark, stay below 101."""
    probe, _light = loaded
    for step in range(60):
        await bus.claim(count=5)
        stats = await bus.stats(lanes=LANES)
        assert stats.lanes_total <= LANES
        assert all(lane.lag < LANES for lane in stats.lanes), step
        assert stats.lag_max < LANES, step
    # Only the heavy lane is left now: it is served on every claim, so its lag is 0, not its depth.
    stats = await bus.stats(lanes=LANES)
    assert [(s.lane, s.lag) for s in stats.lanes] == [("heavy", 0)]
    assert stats.lanes[0].depth == HEAVY + LIGHT - 300
    probe.check()
