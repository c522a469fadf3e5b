"""echomq.partition_control: a PartitionedBus's control, gates, results and events, each where its
subject lives (here three partitions on one server: the same routing as on a cluster)."""

from __future__ import annotations

import asyncio

import pytest

from echomq import Control, Finish, InvalidOption, PartitionedBus, Rate, UnknownJob, Worker, ids
from echomq.tasks import Tasks
from tests.support.workers import running


@pytest.fixture
async def pbus(redis_server, tag):
    bus = PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3)
    yield bus
    await bus.aclose()


def lanes_on_each(pbus) -> list[str]:
    """One lane name per partition."""
    found: dict[int, str] = {}
    for i in range(1000):
        lane = f"lane-{i}"
        found.setdefault(pbus.partitions.index(pbus.route(lane)), lane)
        if len(found) == len(pbus.partitions):
            return [found[i] for i in sorted(found)]
    raise AssertionError("no lane for every partition")


async def test_cancel_revoke_and_result_find_the_partition_that_holds_the_job(pbus):
    lanes = lanes_on_each(pbus)
    queued, active = ids.mint("JOB"), ids.mint("JOB")
    await pbus.enqueue(active, lane=lanes[2], payload=b"")
    [claim] = await pbus.claim(count=1)
    await pbus.enqueue(queued, lane=lanes[1], payload=b"")
    assert await pbus.cancel(queued, "x") is Control.DONE
    waiting = asyncio.create_task(pbus.result(active, timeout=30))
    await asyncio.sleep(0.2)
    assert await pbus.complete(claim, b"answer") is Finish.DONE
    assert await waiting == b"answer"
    assert await pbus.revoke(active) is Control.REFUSED  # done, not active
    with pytest.raises(UnknownJob):
        await pbus.cancel(ids.mint("JOB"))


async def test_a_lane_gate_goes_to_its_partition_and_star_to_every_one(pbus):
    lanes = lanes_on_each(pbus)
    await pbus.pause(lanes[0])
    await pbus.set_lane_cap("*", 2)
    await pbus.set_rate_limit(Rate(5, 1000), lane=lanes[1])
    settings = [await bus.flow_settings() for bus in pbus.partitions]
    assert [s.paused_lanes for s in settings] == [{lanes[0]}, set(), set()]
    assert [s.caps for s in settings] == [{"*": 2}] * 3
    assert [set(s.rates) for s in settings] == [set(), {lanes[1]}, set()]
    with pytest.raises(InvalidOption):
        await pbus.set_rate_limit(Rate(5, 1000))
    await pbus.pause()
    assert all([(await bus.flow_settings()).paused for bus in pbus.partitions])
    await pbus.resume()
    await pbus.resume(lanes[0])
    assert not any([(await bus.flow_settings()).paused_lanes for bus in pbus.partitions])


async def test_tasks_by_name_run_and_answer_on_a_partitioned_bus(pbus):
    tasks = Tasks(lane="t")
    tasks.register("double", lambda n: 2 * n)
    sent = [await tasks["double"].enqueue_with(pbus, (n,), lane=f"t{n}") for n in range(6)]
    async with running(Worker(pbus, tasks.handler, concurrency=3)):
        answers = [await tasks["double"].result(pbus, s.job, timeout=30) for s in sent]
    assert answers == [0, 2, 4, 6, 8, 10]
