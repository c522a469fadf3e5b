"""echomq.schedules: a schedule's tick ids (valid JOB ids, the tick's time, the same in every process,
other ids for another definition) and the catch-up policy that decides which ticks a step submits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq import (
    InvalidLane,
    InvalidOption,
    InvalidPayload,
    InvalidSchedule,
    PayloadTooLarge,
    Schedule,
    Settings,
    ids,
)
from echomq.core import MAX_PAYLOAD
from echomq.schedules import SAFETY_MS, Planner, catch_up_limit_ms

HOUR = 3_600_000
NOON = 1_735_732_800_000  # 2025-01-01 12:00 UTC


def beat(**changes) -> Schedule:
    fields = {"name": "beat", "lane": "beats", "cron": "@hourly", "payload": b"ping"} | changes
    return Schedule(**fields)


def test_a_tick_id_is_a_job_id_whose_time_is_the_tick():
    """The id is a well-formed JOB id; its time part is the tick time."""
    job = beat().tick_id(NOON)
    assert ids.check(job, "JOB") == job
    assert ids.timestamp_ms(job) == NOON


def test_the_same_schedule_mints_the_same_id_for_a_tick():
    """Two schedules made alike (as two processes make them) agree on every tick's id."""
    assert beat().tick_id(NOON) == beat().tick_id(NOON)
    assert beat().tick_id(NOON) != beat().tick_id(NOON + HOUR)


def test_tick_ids_sort_by_tick_time():
    """Later ticks have ids that sort later (the lane serves them in tick order)."""
    jobs = [beat().tick_id(NOON + k * HOUR) for k in range(50)]
    assert jobs == sorted(jobs)


@pytest.mark.parametrize(
    "change",
    [{"name": "beat2"}, {"cron": "@daily"}, {"lane": "other"}, {"payload": b"pong"}, {"payload": b""}],
)
def test_a_changed_definition_mints_other_ids(change):
    """Another name, timetable, lane or payload: another id for the same tick (so it is no CONFLICT)."""
    assert beat(**change).tick_id(0) != beat().tick_id(0)


@pytest.mark.parametrize(
    "change",
    [{"cron": "0 * * * *"}, {"cron": "0 */1 * * *"}, {"max_attempts": 9}, {"priority": -5}],
)
def test_the_same_timetable_spelled_otherwise_or_other_options_keep_the_ids(change):
    """@hourly and '0 * * * *' are one schedule; max attempts and priority are not its identity."""
    assert beat(**change).tick_id(NOON) == beat().tick_id(NOON)


def test_a_time_that_is_not_a_tick_has_no_id():
    with pytest.raises(InvalidOption, match="not a tick"):
        beat().tick_id(NOON + 60_000)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": ""}, InvalidOption),
        ({"name": "a b"}, InvalidOption),
        ({"name": "x" * 65}, InvalidOption),
        ({"name": 5}, InvalidOption),
        ({"lane": "bad lane"}, InvalidLane),
        ({"cron": None}, InvalidSchedule),
        ({"every_ms": 1000}, InvalidSchedule),
        ({"cron": "61 * * * *"}, InvalidSchedule),
        ({"cron": None, "every_ms": 5}, InvalidSchedule),
        ({"cron": None, "every_ms": "1000"}, InvalidSchedule),
        ({"payload": "text"}, InvalidPayload),
        ({"payload": b"x" * (MAX_PAYLOAD + 1)}, PayloadTooLarge),
        ({"max_attempts": 0}, InvalidOption),
        ({"priority": 10**7}, InvalidOption),
    ],
)
def test_a_bad_schedule_is_refused_when_made(fields, error):
    with pytest.raises(error):
        beat(**fields)


# --- the catch-up policy ---------------------------------------------------------------------------------


def interval(every_ms: int) -> Schedule:
    return Schedule(name="i", lane="L", every_ms=every_ms)


def test_a_first_step_submits_the_latest_ticks_of_the_catch_up_window():
    """Fresh: the window is (now - catch_up_ms, now]; past max_catch_up the oldest are skipped."""
    planner = Planner([interval(1000)], Settings(), catch_up_ms=10_000, max_catch_up=3)
    now = NOON + 400
    assert planner.due(planner.schedules[0], now) == ([NOON - 2000, NOON - 1000, NOON], 7)


def test_a_later_step_submits_the_ticks_since_the_last_recorded_one():
    """After a recorded step, a step submits only the ticks after it; an unrecorded step (a failed
    enqueue) leaves them due again."""
    planner = Planner([interval(1000)], Settings(), catch_up_ms=10_000, max_catch_up=100)
    schedule = planner.schedules[0]
    first, _ = planner.due(schedule, NOON)
    assert len(first) == 10
    assert planner.due(schedule, NOON + 2500) == ([NOON - 7000 + k * 1000 for k in range(10)], 0)
    planner.submitted(schedule, NOON)
    assert planner.due(schedule, NOON + 2500) == ([NOON + 1000, NOON + 2000], 0)
    planner.submitted(schedule, NOON + 2500)
    assert planner.due(schedule, NOON + 2900) == ([], 0)
    assert planner.due(schedule, NOON + 1000) == ([], 0)  # a server clock that stepped back


@given(st.lists(st.integers(1, 4_000), min_size=1, max_size=40), st.integers(10, 900))
def test_steps_with_gaps_inside_the_window_submit_every_tick_once(gaps, every_ms):
    """Whatever the spacing of recorded steps (each gap within the window), the ticks submitted are
    every tick from the first window on, each once."""
    planner = Planner([interval(every_ms)], Settings(), catch_up_ms=5_000, max_catch_up=10_000)
    schedule = planner.schedules[0]
    now, seen = NOON, []
    start = now - 5_000
    for gap in [0, *gaps]:
        now += gap
        ticks, skipped = planner.due(schedule, now)
        assert skipped == 0
        seen += ticks
        planner.submitted(schedule, now)
    assert seen == list(range((start // every_ms + 1) * every_ms, now + 1, every_ms))


def test_the_catch_up_window_stays_inside_what_the_bus_remembers():
    """The window is bounded by the time an admitted id answers DUPLICATE, less a safety margin."""
    assert catch_up_limit_ms(Settings()) == 24 * HOUR - SAFETY_MS
    short = Settings(dedup_window_ms=2 * HOUR, result_ttl_ms=HOUR)
    assert catch_up_limit_ms(short) == 2 * HOUR - SAFETY_MS
    long_rows = Settings(dedup_window_ms=HOUR, result_ttl_ms=48 * HOUR)
    assert catch_up_limit_ms(long_rows) == 6 * HOUR - SAFETY_MS  # bounded by the 6 h id span
    assert catch_up_limit_ms(Settings(dedup_window_ms=0, result_ttl_ms=HOUR)) == HOUR - SAFETY_MS
    with pytest.raises(InvalidOption, match="catch_up_ms"):
        Planner([beat()], short, catch_up_ms=2 * HOUR, max_catch_up=10)
    with pytest.raises(InvalidOption, match="forgets a finished id too soon"):
        Planner([beat()], Settings(dedup_window_ms=0, result_ttl_ms=0), catch_up_ms=1000, max_catch_up=1)


@pytest.mark.parametrize(
    ("schedules", "options", "error"),
    [
        ([], {}, InvalidOption),
        (["beat"], {}, InvalidOption),
        ([beat(), beat(cron="@daily")], {}, InvalidOption),  # two schedules named alike
        ([beat()], {"catch_up_ms": 999}, InvalidOption),
        ([beat()], {"max_catch_up": 0}, InvalidOption),
        ([beat()], {"max_catch_up": 10**6}, InvalidOption),
        ([beat(payload=b"x" * 100)], {"settings": Settings(max_payload=10)}, PayloadTooLarge),
    ],
)
def test_a_bad_scheduler_is_refused_when_made(schedules, options, error):
    settings = options.pop("settings", Settings())
    arguments = {"catch_up_ms": HOUR, "max_catch_up": 100} | options
    with pytest.raises(error):
        Planner(schedules, settings, **arguments)
