"""echomq.cron: cron expressions and intervals read strictly, their ticks checked against known calendars
(leap years, month ends, year ends, DST dates that UTC does not have, Vixie's day rule) and, with
hypothesis, against an oracle built from the generated fields (every tick matches; none is skipped)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from echomq import InvalidInput, InvalidOption, InvalidSchedule
from echomq.cron import LAST_MS, MINUTE_MS, Cron, Interval, parse


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()) * 1000


def day_of(ms: int) -> tuple[int, int, int]:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.year, moment.month, moment.day


def cron(text: str) -> Cron:
    timetable = parse(text)
    assert isinstance(timetable, Cron)
    return timetable


# --- known calendars ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (at(2023, 3, 1), at(2024, 2, 29)),
        (at(2024, 2, 29), at(2028, 2, 29)),
        (at(1999, 3, 1), at(2000, 2, 29)),  # 2000 is a leap year (divisible by 400)
        (at(2097, 3, 1), at(2104, 2, 29)),  # 2100 is not (divisible by 100)
    ],
)
def test_february_29th_fires_only_in_leap_years(after, expected):
    """'0 0 29 2 *' skips the years without a February 29th, the Gregorian century rule included."""
    assert cron("0 0 29 2 *").next_after(after) == expected


def test_the_31st_fires_only_in_months_that_have_one():
    """'0 0 31 * *' fires in the seven months with 31 days, none other."""
    ticks = list(cron("0 0 31 * *").ticks(at(2024, 1, 1), at(2025, 1, 1)))
    assert [day_of(t)[1] for t in ticks] == [1, 3, 5, 7, 8, 10, 12]


def test_the_30th_skips_february_only():
    """'0 0 30 * *' fires 11 times a year: every month but February."""
    ticks = list(cron("0 0 30 * *").ticks(at(2023, 1, 1), at(2024, 1, 1)))
    assert [day_of(t)[1] for t in ticks] == [1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_the_last_minute_of_a_year_rolls_into_the_next():
    """A tick at the year's last minute is followed by the next year's, and New Year follows December."""
    assert cron("59 23 31 12 *").next_after(at(2024, 12, 31, 23, 59)) == at(2025, 12, 31, 23, 59)
    assert cron("@yearly").next_after(at(2024, 12, 31, 23, 59)) == at(2025, 1, 1)
    assert cron("@monthly").next_after(at(2024, 1, 31, 12)) == at(2024, 2, 1)


@pytest.mark.parametrize(
    ("text", "first_day", "last_day"),
    [
        ("30 2 * * *", (2024, 3, 9), (2024, 3, 12)),  # US clocks skip 02:30 on 2024-03-10
        ("30 2 * * *", (2024, 3, 30), (2024, 4, 2)),  # EU clocks skip 02:30 on 2024-03-31
        ("30 1 * * *", (2024, 11, 2), (2024, 11, 5)),  # US clocks repeat 01:30 on 2024-11-03
    ],
)
def test_utc_has_no_daylight_saving_time(text, first_day, last_day):
    """Around the days local clocks skip or repeat an hour, a daily tick fires once a day, 24 h apart."""
    ticks = list(cron(text).ticks(at(*first_day), at(*last_day)))
    assert len(ticks) == 3
    assert [b - a for a, b in itertools.pairwise(ticks)] == [86_400_000] * 2


def test_vixie_rule_both_day_fields_restricted_fire_on_either():
    """'0 0 13 * 5' fires on the 13th and on every Friday (October 2024: Fridays 4, 11, 18, 25)."""
    days = [day_of(t)[2] for t in cron("0 0 13 * 5").ticks(at(2024, 10, 1), at(2024, 10, 31))]
    assert days == [4, 11, 13, 18, 25]
    assert [day_of(t)[2] for t in cron("0 0 13 * *").ticks(at(2024, 10, 1), at(2024, 10, 31))] == [13]
    assert [day_of(t)[2] for t in cron("0 0 * * FRI").ticks(at(2024, 10, 1), at(2024, 10, 31))] == [
        4,
        11,
        18,
        25,
    ]


def test_vixie_rule_a_day_field_starting_with_a_star_needs_both():
    """'0 0 */2 * 5': the day of month starts with '*', so a day must be odd *and* a Friday."""
    days = [day_of(t)[2] for t in cron("0 0 */2 * 5").ticks(at(2024, 10, 1), at(2024, 10, 31))]
    assert days == [11, 25]
    assert not cron("0 0 */2 * 5").day_or
    assert cron("0 0 1-31 * 5").day_or


def test_weekly_fires_on_sundays_at_midnight():
    """@weekly is '0 0 * * 0': 2024-10-06 is the first Sunday of October 2024."""
    assert cron("@weekly").next_after(at(2024, 10, 1)) == at(2024, 10, 6)
    assert cron("@weekly").next_after(at(2024, 10, 6)) == at(2024, 10, 13)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@ANNUALLY", "0 0 1 1 *"),
        ("0 0 1 jan,JUL *", "0 0 1 1,7 *"),
        ("0 0 * * mon-fri", "0 0 * * 1-5"),
        ("0 0 * * 7", "0 0 * * 0"),
        ("0 0 * * SUN", "0 0 * * 0"),
        ("0 0 * * 5-7", "0 0 * * 0,5,6"),
        ("*/15 * * * *", "0,15,30,45 * * * *"),
        ("10-50/20 * * * *", "10,30,50 * * * *"),
        ("0 */6 * * *", "0 0,6,12,18 * * *"),
        (" 0\t0  * * * ", "0 0 * * *"),
    ],
)
def test_the_same_ticks_spelled_otherwise_read_the_same(one, other):
    """Aliases, names (any case), 7 for Sunday, steps, blanks: the same meaning, the same canonical text."""
    assert cron(one).canonical == cron(other).canonical


def test_steps_and_ranges_expand_to_their_values():
    """A step after '*' counts from the field's lowest value; after a range, from the range's start."""
    assert cron("*/15 * * * *").minutes == (0, 15, 30, 45)
    assert cron("0 9-17/4 * * *").hours == (9, 13, 17)
    assert cron("0 0 */10 * *").days == (1, 11, 21, 31)
    assert cron("0 0 1 */5 *").months == (1, 6, 11)


def test_latest_is_the_tail_of_the_window_and_its_count():
    """latest(a, b, n) is the last n of ticks(a, b), with the number of ticks the window holds."""
    timetable = cron("*/15 9-17 * * MON-FRI")
    window = list(timetable.ticks(at(2024, 1, 1), at(2024, 1, 8)))
    assert timetable.latest(at(2024, 1, 1), at(2024, 1, 8), 5) == (window[-5:], len(window))
    assert timetable.latest(at(2024, 1, 1), at(2024, 1, 8), 0) == ([], len(window))
    assert len(window) == 5 * 9 * 4  # Monday to Friday, 9:00 to 17:45, four a hour
    assert window[0] == at(2024, 1, 1, 9)
    assert window[-1] == at(2024, 1, 5, 17, 45)


def test_a_window_ends_inclusive_and_starts_exclusive():
    """ticks(a, b) holds b when b is a tick, never a."""
    hourly = cron("@hourly")
    assert list(hourly.ticks(at(2024, 1, 1, 1), at(2024, 1, 1, 3))) == [at(2024, 1, 1, 2), at(2024, 1, 1, 3)]


def test_no_tick_before_the_year_10000_is_an_invalid_schedule():
    """The search stops at the end of the year 9999 (past it no datetime, nor id time, is defined)."""
    with pytest.raises(InvalidSchedule, match="10000"):
        cron("0 0 29 2 *").next_after(at(9996, 3, 1))
    assert cron("@yearly").next_after(at(9998, 12, 31)) == at(9999, 1, 1)
    with pytest.raises(InvalidSchedule):
        cron("@yearly").next_after(at(9999, 1, 1))


# --- intervals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "every_ms"),
    [("@every 250ms", 250), ("@every 2s", 2000), ("@every 1h30m", 5_400_000), ("@EVERY 1d", 86_400_000)],
)
def test_every_reads_a_duration(text, every_ms):
    assert parse(text) == Interval(every_ms)


def test_interval_ticks_are_the_multiples_of_the_interval_since_the_epoch():
    """Every process computes the same ticks: multiples of every_ms, whatever time it starts at."""
    every = Interval(300)
    assert every.next_after(0) == 300
    assert every.next_after(1_000) == 1_200
    assert every.next_after(1_200) == 1_500
    assert list(every.ticks(1_000, 2_100)) == [1_200, 1_500, 1_800, 2_100]
    assert every.latest(1_000, 2_100, 2) == ([1_800, 2_100], 4)
    assert every.matches(1_500)
    assert not every.matches(1_501)


# --- bad input -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("* * * *", "5 fields"),
        ("* * * * * *", "5 fields"),
        ("60 * * * *", "minute is 0-59"),
        ("* 24 * * *", "hour is 0-23"),
        ("* * 0 * *", "day of month is 1-31"),
        ("* * 32 * *", "day of month is 1-31"),
        ("* * * 13 *", "month is 1-12"),
        ("* * * * 8", "day of week is 0-7"),
        ("5-1 * * * *", "backwards"),
        ("*/0 * * * *", "step"),
        ("*/61 * * * *", "step"),
        ("5/15 * * * *", "a step follows"),
        ("1,,2 * * * *", "expected a number"),
        ("-5 * * * *", "expected a number"),
        ("a * * * *", "expected a number"),
        ("* * * FOO *", "expected a number"),
        ("* * * * MONDAY", "expected a number"),
        ("* * * JAN-MON *", "expected a number"),
        ("\u0663 * * * *", "printable ASCII"),  # an Arabic-Indic digit 3
        ("0 0 1 1 *\n", "printable ASCII"),
        ("99999999999999999999 * * * *", "expected a number"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("@reboot", "unknown schedule alias"),
        ("@every", "duration"),
        ("@every 5", "duration"),
        ("@every 1.5s", "duration"),
        ("@every 0s", "an interval is an int from 10"),
        ("@every 5ms", "an interval is an int from 10"),
        ("@every 400d", "an interval is an int from 10"),
        ("x" * 300, "at most"),
    ],
)
def test_a_bad_schedule_is_refused_with_a_typed_error_naming_the_problem(text, message):
    """Every malformed text raises InvalidSchedule (an InvalidOption, an InvalidInput) that says why."""
    with pytest.raises(InvalidSchedule, match=message) as caught:
        parse(text)
    assert isinstance(caught.value, InvalidOption)
    assert isinstance(caught.value, InvalidInput)


@pytest.mark.parametrize("value", [None, 5, b"* * * * *", ["*"] * 5])
def test_a_schedule_that_is_not_text_is_refused(value):
    with pytest.raises(InvalidSchedule, match="is a str"):
        parse(value)


@pytest.mark.parametrize("value", [-1, LAST_MS + 1, True, 1.5, "0"])
def test_a_time_out_of_range_is_refused(value):
    """Times are int ms from the epoch to the year 9999; anything else is an InvalidOption."""
    with pytest.raises(InvalidOption):
        cron("@hourly").next_after(value)
    with pytest.raises(InvalidOption):
        Interval(1000).next_after(value)


# --- properties ------------------------------------------------------------------------------------------

FIELDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


@st.composite
def field_text(draw, index: int) -> tuple[str, set[int]]:
    """A field's text and the set of values it should allow (7 read as Sunday, 0)."""
    low, high = FIELDS[index]
    star_high = 6 if index == 4 else high
    parts, values = [], set()
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "range", "star", "star_step", "range_step"]))
        a, b = sorted(draw(st.tuples(st.integers(low, high), st.integers(low, high))))
        step = draw(st.integers(1, high - low + 1))
        if kind == "value":
            parts.append(str(a))
            values.add(a)
        elif kind == "range":
            parts.append(f"{a}-{b}")
            values.update(range(a, b + 1))
        elif kind == "star":
            parts.append("*")
            values.update(range(low, star_high + 1))
        elif kind == "star_step":
            parts.append(f"*/{step}")
            values.update(range(low, star_high + 1, step))
        else:
            parts.append(f"{a}-{b}/{step}")
            values.update(range(a, b + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return ",".join(parts), values


@st.composite
def expressions(draw) -> tuple[str, object]:
    """A cron text and an oracle: a function of a datetime that says whether that minute fires."""
    fields = [draw(field_text(i)) for i in range(5)]
    text = " ".join(f for f, _ in fields)
    minutes, hours, days, months, weekdays = (v for _, v in fields)
    either = not fields[2][0].startswith("*") and not fields[4][0].startswith("*")

    def fires(moment: datetime) -> bool:
        in_day, in_weekday = moment.day in days, moment.isoweekday() % 7 in weekdays
        day = (in_day or in_weekday) if either else (in_day and in_weekday)
        return moment.minute in minutes and moment.hour in hours and moment.month in months and day

    return text, fires


def _minute(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


times = st.integers(at(2000, 1, 1), at(2100, 1, 1))


@settings(max_examples=150, deadline=None)
@given(expressions(), times)
def test_next_after_is_a_matching_minute_and_none_between_is_skipped(expression, start):
    """The tick after ``start`` fires (by the oracle) and no minute before it fires, for two days."""
    text, fires = expression
    try:
        timetable = cron(text)
    except InvalidSchedule:
        assume(False)  # a day no month of the expression has (e.g. the 31st of February)
        return
    tick = timetable.next_after(start)
    assert tick > start
    assert tick % MINUTE_MS == 0
    assert fires(_minute(tick))
    assert timetable.matches(tick)
    minute = (start // MINUTE_MS + 1) * MINUTE_MS
    while minute < min(tick, start + 2 * 86_400_000):
        assert not fires(_minute(minute)), f"{text}: {_minute(minute)} fires but next_after skipped it"
        minute += MINUTE_MS


@settings(max_examples=60, deadline=None)
@given(expressions(), times, st.integers(0, 86_400_000))
def test_ticks_of_a_window_are_exactly_its_matching_minutes(expression, start, length):
    """ticks(a, b) is every minute of (a, b] the oracle fires on, in order."""
    text, fires = expression
    try:
        timetable = cron(text)
    except InvalidSchedule:
        assume(False)
        return
    end = start + length
    first = (start // MINUTE_MS + 1) * MINUTE_MS
    expected = [m for m in range(first, end + 1, MINUTE_MS) if fires(_minute(m))]
    assert list(timetable.ticks(start, end)) == expected


@given(st.integers(10, 10**9), st.integers(0, at(2100, 1, 1)))
def test_an_intervals_next_tick_is_the_next_multiple(every_ms, start):
    """The tick after ``start`` is a multiple of the interval, later, and the first such."""
    tick = Interval(every_ms).next_after(start)
    assert tick % every_ms == 0
    assert start < tick <= start + every_ms
