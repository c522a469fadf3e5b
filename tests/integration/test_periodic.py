"""echomq.periodic against a real Redis: schedulers submit each tick under its derived id, decided on the
server's clock; a second scheduler's submission is a DUPLICATE; the catch-up policy; a changed schedule;
the blocking twin; a partitioned bus; and bad input that changes nothing."""

from __future__ import annotations

import asyncio
import threading

import pytest

from echomq import (
    Admission,
    Bus,
    InvalidOption,
    InvalidSchedule,
    PartitionedBus,
    PayloadTooLarge,
    Schedule,
    Scheduler,
    Settings,
    SyncBus,
    SyncScheduler,
    ids,
)
from echomq.periodic import server_ms

HOUR = 3_600_000


def hourly(**changes) -> Schedule:
    fields = {"name": "report", "lane": "reports", "every_ms": HOUR, "payload": b"go"} | changes
    return Schedule(**fields)


def lane_ticks(sync_redis, bus: Bus | SyncBus, lane: str) -> list[int]:
    """The tick times of the jobs queued on ``lane``, in lane order."""
    members = sync_redis.zrange(bus.keys.lane(lane), 0, -1)
    return [ids.timestamp_ms(m.decode()) for m in members]


def counters(sync_redis, bus: Bus | SyncBus) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in sync_redis.hgetall(bus.keys.stats).items()}


async def test_a_step_enqueues_the_due_tick_and_a_second_scheduler_is_a_duplicate(bus, sync_redis):
    """An hourly interval with a one-hour window has one due tick: the last hour boundary on the server's
    clock. The first scheduler admits it under the schedule's id; another scheduler's step is DUPLICATE."""
    schedule = hourly()
    report = await Scheduler(bus, [schedule]).tick_once()
    expected = report.server_ms // HOUR * HOUR
    assert [(t.schedule, t.at_ms, t.admission) for t in report.ticks] == [
        ("report", expected, Admission.ADMITTED)
    ]
    assert report.ticks[0].job == schedule.tick_id(expected)
    info = await bus.inspect(report.ticks[0].job)
    assert (info.lane, info.payload, info.max_attempts, info.state.value) == ("reports", b"go", 5, "queued")
    again = await Scheduler(bus, [hourly()]).tick_once()
    if again.server_ms // HOUR * HOUR == expected:  # (an hour boundary between the steps adds a tick)
        assert [t.admission for t in again.ticks] == [Admission.DUPLICATE]
    assert lane_ticks(sync_redis, bus, "reports") == sorted({t.at_ms for t in report.ticks + again.ticks})
    assert report.wait_ms == expected + HOUR - report.server_ms


async def test_server_time_is_the_bus_servers_clock(bus):
    """server_ms reads TIME: within a second of the server's own reply."""
    direct = await bus.redis.time()
    assert abs(await server_ms(bus) - (direct[0] * 1000 + direct[1] // 1000)) < 1000


async def test_schedulers_taking_turns_enqueue_every_tick_once(bus, sync_redis):
    """Two schedulers stepping in turn over many ticks of a 50 ms interval: every tick from the first
    window to the last step is queued once, and each was submitted by both (one admission, duplicates)."""
    schedule = Schedule(name="fast", lane="fast", every_ms=50)
    one = Scheduler(bus, [schedule], catch_up_ms=2_000, max_catch_up=1_000)
    other = Scheduler(bus, [schedule], catch_up_ms=2_000, max_catch_up=1_000)
    first = await one.tick_once()
    reports = [first]
    for turn in range(12):
        await asyncio.sleep(0.03 + 0.02 * (turn % 3))
        reports.append(await (other if turn % 2 else one).tick_once())
    reports.append(await other.tick_once())
    ticks = lane_ticks(sync_redis, bus, "fast")
    start = (first.server_ms - 2_000) // 50 * 50 + 50
    assert ticks == list(range(start, reports[-1].server_ms // 50 * 50 + 1, 50))
    answers = [t.admission for r in reports for t in r.ticks]
    assert answers.count(Admission.ADMITTED) == len(ticks)
    assert answers.count(Admission.DUPLICATE) >= len(ticks) // 2  # `other` re-submits what `one` admitted
    seen = counters(sync_redis, bus)
    assert (seen["admitted"], seen["duplicate"]) == (len(ticks), answers.count(Admission.DUPLICATE))


async def test_the_catch_up_limit_takes_the_latest_ticks_and_counts_the_rest(bus, sync_redis):
    """Ten ticks in the window, max_catch_up=3: the three latest are enqueued, seven are skipped."""
    schedule = Schedule(name="sec", lane="sec", every_ms=1000)
    report = await Scheduler(bus, [schedule], catch_up_ms=10_000, max_catch_up=3).tick_once()
    last = report.server_ms // 1000 * 1000
    assert [t.at_ms for t in report.ticks] == [last - 2000, last - 1000, last]
    assert report.skipped == 7
    assert lane_ticks(sync_redis, bus, "sec") == [last - 2000, last - 1000, last]


async def test_a_host_clock_far_off_does_not_move_the_ticks(bus, sync_redis, monkeypatch):
    """A host two hours ahead submits the tick of the server's hour, under the same id (a DUPLICATE of an
    honest scheduler's); a host further off than admission allows has its tick refused, not raised."""
    honest = await Scheduler(bus, [hourly()]).tick_once()
    monkeypatch.setattr(ids, "_SKEW_MS", 2 * HOUR)
    skewed = await Scheduler(bus, [hourly()]).tick_once()
    if skewed.server_ms // HOUR == honest.server_ms // HOUR:
        assert [(t.job, t.admission) for t in skewed.ticks] == [(honest.ticks[0].job, Admission.DUPLICATE)]
    monkeypatch.setattr(ids, "_SKEW_MS", 30 * HOUR)  # past the 24 h span admission accepts
    refused = await Scheduler(bus, [hourly(name="other")]).tick_once()
    assert (refused.ticks, refused.refused) == ((), 1)
    assert len(lane_ticks(sync_redis, bus, "reports")) == len({t.at_ms for t in honest.ticks + skewed.ticks})


async def test_a_changed_schedule_enqueues_its_own_ticks(bus, sync_redis):
    """Another payload or lane under the same name: the tick is enqueued again under another id (not a
    CONFLICT). The same timetable spelled as cron, or other max attempts, is the same schedule."""
    report = await Scheduler(bus, [Schedule(name="r", lane="a", cron="@hourly", payload=b"1")]).tick_once()
    [tick] = report.ticks
    same = [
        Schedule(name="r", lane="a", cron="0 * * * *", payload=b"1", max_attempts=9),
        Schedule(name="r", lane="a", cron="0 */1 * * *", payload=b"1", priority=3),
    ]
    changed = [
        Schedule(name="r", lane="a", cron="@hourly", payload=b"2"),
        Schedule(name="r", lane="b", cron="@hourly", payload=b"1"),
    ]
    for schedule in same + changed:
        again = await Scheduler(bus, [schedule]).tick_once()
        if again.server_ms // HOUR * HOUR != tick.at_ms:
            pytest.skip("an hour boundary passed during the test")
        expected = Admission.DUPLICATE if schedule in same else Admission.ADMITTED
        assert [(t.at_ms, t.admission) for t in again.ticks] == [(tick.at_ms, expected)]
    assert lane_ticks(sync_redis, bus, "a") == [tick.at_ms, tick.at_ms]
    assert lane_ticks(sync_redis, bus, "b") == [tick.at_ms]
    assert (await bus.inspect(tick.job)).max_attempts == 5  # the first admission's options stay


async def test_run_steps_until_stopped(bus, sync_redis):
    """run() steps on every tick of a 100 ms interval until stop(), then returns."""
    scheduler = Scheduler(bus, [Schedule(name="run", lane="run", every_ms=100)], catch_up_ms=1_000)
    task = asyncio.create_task(scheduler.run())
    while len(lane_ticks(sync_redis, bus, "run")) < 20:
        await asyncio.sleep(0.05)
    scheduler.stop()
    await asyncio.wait_for(task, 10)
    ticks = lane_ticks(sync_redis, bus, "run")
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 100))


async def test_the_blocking_scheduler_and_the_asyncio_one_agree(redis_server, bus, sync_redis, tag):
    """A SyncScheduler on a SyncBus mints the same ids: its step after the asyncio one's is a DUPLICATE,
    and its run() in a thread stops when asked."""
    first = await Scheduler(bus, [hourly()]).tick_once()
    with SyncBus.from_url(redis_server.url, tag=tag) as sync_bus:
        blocking = SyncScheduler(sync_bus, [hourly()])
        report = await asyncio.to_thread(blocking.tick_once)
        if report.server_ms // HOUR == first.server_ms // HOUR:
            assert [(t.job, t.admission) for t in report.ticks] == [(first.ticks[0].job, Admission.DUPLICATE)]
        runner = SyncScheduler(sync_bus, [Schedule(name="s", lane="s", every_ms=100)], catch_up_ms=1_000)
        thread = threading.Thread(target=runner.run)
        thread.start()
        while len(lane_ticks(sync_redis, bus, "s")) < 5:
            await asyncio.sleep(0.05)
        runner.stop()
        await asyncio.to_thread(thread.join, 10)
        assert not thread.is_alive()


async def test_a_partitioned_bus_enqueues_each_tick_on_its_lanes_partition(redis_server, tag, sync_redis):
    """On a PartitionedBus each schedule's ticks land in its lane's partition, once."""
    async with PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3) as bus:
        schedules = [hourly(name=f"s{i}", lane=f"lane-{i}") for i in range(6)]
        first = await Scheduler(bus, schedules).tick_once()
        again = await Scheduler(bus, schedules).tick_once()
        assert [t.admission for t in first.ticks] == [Admission.ADMITTED] * 6
        if again.server_ms // HOUR == first.server_ms // HOUR:
            assert [t.admission for t in again.ticks] == [Admission.DUPLICATE] * 6
        for schedule, tick in zip(schedules, first.ticks, strict=True):
            assert lane_ticks(sync_redis, bus.route(schedule.lane), schedule.lane)[0] == tick.at_ms


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda bus: Scheduler(bus, [hourly(), hourly()]), InvalidOption),
        (lambda bus: Scheduler(bus, [hourly()], catch_up_ms=48 * HOUR), InvalidOption),
        (lambda bus: Scheduler(bus, [hourly()], max_catch_up=0), InvalidOption),
        (lambda bus: Scheduler(bus, []), InvalidOption),
        (
            lambda bus: Scheduler(Bus(bus.redis, bus.tag, Settings(max_payload=1)), [hourly()]),
            PayloadTooLarge,
        ),
        (
            lambda bus: Scheduler(
                Bus(bus.redis, bus.tag, Settings(dedup_window_ms=0, result_ttl_ms=0)), [hourly()]
            ),
            InvalidOption,
        ),
        (lambda bus: Scheduler(bus, [hourly(cron="@reboot", every_ms=None)]), InvalidSchedule),
    ],
)
async def test_bad_input_changes_nothing(bus, sync_redis, make, error):
    """A bad schedule or scheduler raises its typed error when made, and the bus has no key."""
    with pytest.raises(error):
        make(bus)
    assert sync_redis.keys(f"emq:{{{bus.tag}}}:*") == []
