"""When a periodic job's ticks fall: cron expressions and fixed intervals, in UTC, on Unix milliseconds.

:func:`parse` reads one text into a :class:`Cron` or an :class:`Interval` (a :data:`Timetable`); both
answer :meth:`~Cron.matches`, :meth:`~Cron.next_after` (the first tick strictly after a time) and
:meth:`~Cron.ticks` (the ticks of a window), and :meth:`~Cron.latest` (the last ticks of a window and
how many it holds). Pure: no I/O, no clock of its own; :mod:`echomq.periodic` feeds it the server's.

* **Cron**: five fields separated by blanks, ``minute hour day-of-month month day-of-week``, with ranges
  ``1-5``, lists ``1,3,5``, steps ``*/15`` and ``10-50/20``, ``*``, month names ``JAN``-``DEC`` and
  weekday names ``SUN``-``SAT`` (any case, in ranges too), day of week 0-7 with both 0 and 7 Sunday.
  A step follows ``*`` or a range; ``5/15`` is refused (implementations disagree on what it means:
  write ``5-59/15``). A tick is the start of every matching minute.
* **Vixie's day rule**, as in Vixie cron and cronie: when both day fields are restricted (neither starts
  with ``*``) a day matching *either* fires, so ``0 0 13 * FRI`` fires on every 13th and every Friday;
  when either starts with ``*`` (``*/2`` included) a day must match both.
* **Aliases**: ``@yearly`` (``@annually``) ``0 0 1 1 *``, ``@monthly`` ``0 0 1 * *``, ``@weekly``
  ``0 0 * * 0``, ``@daily`` (``@midnight``) ``0 0 * * *``, ``@hourly`` ``0 * * * *``. ``@reboot`` has no
  meaning for a queue and is refused.
* **Intervals**: ``@every 500ms``, ``@every 2s``, ``@every 1h30m`` (units ms, s, m, h, d), or
  ``Interval(every_ms)``: a tick at every multiple of the interval since the epoch, so every process
  computes the same ticks without sharing a start time.
* **UTC only**: no time zone, so no daylight saving time: ``30 2 * * *`` fires once every day, 24 h apart,
  on the days local clocks skip or repeat 02:30.

Every bad text (a field out of range, a backwards range, a zero step, a day that no month has, such as
``0 0 30 2 *``) raises :class:`~echomq.errors.InvalidSchedule` naming what is wrong.
"""

from __future__ import annotations

import bisect
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from echomq._validate import check_int
from echomq.errors import InvalidSchedule

MINUTE_MS = 60_000
MIN_EVERY_MS = 10
MAX_EVERY_MS = 366 * 24 * 3600 * 1000
MAX_TEXT = 200
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_MS = int((datetime(9999, 12, 31, 23, 59, tzinfo=UTC) - _EPOCH).total_seconds()) * 1000

# (name, lowest, highest) of each field, in order; day of week 7 is Sunday again (read as 0).
_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_NAMES = {3: {n: i + 1 for i, n in enumerate(_MONTHS)}, 4: {n: i for i, n in enumerate(_WEEKDAYS)}}
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February's in a leap year
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_TEXT = re.compile(r"[\x20-\x7e\t]*")
_NUMBER = re.compile(r"[0-9]{1,6}")
_DURATION = re.compile(r"(?:[0-9]{1,12}(?:ms|s|m|h|d))+")
_PART = re.compile(r"([0-9]{1,12})(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": MINUTE_MS, "h": 3_600_000, "d": 86_400_000}


def check_ms(name: str, ms: object) -> int:
    """``ms`` if it is an int time from the epoch to the last minute of the year 9999, else InvalidOption."""
    return check_int(name, ms, 0, LAST_MS)


def _datetime(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _at_least(values: tuple[int, ...], value: int) -> int | None:
    """The first of the sorted ``values`` that is ``value`` or more, or None."""
    at = bisect.bisect_left(values, value)
    return values[at] if at < len(values) else None


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed cron expression: the allowed values of each field, sorted, and the day rule."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday
    day_or: bool  # both day fields restricted: a day matching either fires (Vixie)

    @property
    def canonical(self) -> str:
        """The expression's meaning as text: the same for the same ticks spelled otherwise (names or
        numbers, 7 or 0 for Sunday, ``@daily`` or ``0 0 * * *``)."""
        fields = (self.minutes, self.hours, self.days, self.months, self.weekdays)
        return "cron " + " ".join(",".join(map(str, f)) for f in fields) + (" or" if self.day_or else " and")

    def _day(self, moment: datetime) -> bool:
        in_days = moment.day in self.days
        in_weekdays = moment.isoweekday() % 7 in self.weekdays
        return (in_days or in_weekdays) if self.day_or else (in_days and in_weekdays)

    def matches(self, ms: int) -> bool:
        """True when ``ms`` is the start of a minute the expression names."""
        moment = _datetime(check_ms("ms", ms))
        return (
            ms % MINUTE_MS == 0
            and moment.month in self.months
            and self._day(moment)
            and moment.hour in self.hours
            and moment.minute in self.minutes
        )

    def next_after(self, ms: int) -> int:
        """The first tick strictly after ``ms``; InvalidSchedule if none comes before the year 10000."""
        moment = _datetime((check_ms("ms", ms) // MINUTE_MS + 1) * MINUTE_MS)
        next_day = timedelta(days=1)
        try:
            while True:
                if moment.month not in self.months:
                    month = _at_least(self.months, moment.month + 1)
                    year = moment.year if month is not None else moment.year + 1
                    moment = moment.replace(year=year, month=month or self.months[0], day=1, hour=0, minute=0)
                    continue
                if not self._day(moment):
                    moment = (moment + next_day).replace(hour=0, minute=0)
                    continue
                hour = _at_least(self.hours, moment.hour)
                if hour is None:
                    moment = (moment + next_day).replace(hour=0, minute=0)
                    continue
                if hour != moment.hour:
                    moment = moment.replace(hour=hour, minute=0)
                minute = _at_least(self.minutes, moment.minute)
                if minute is None:
                    moment = moment.replace(minute=0) + timedelta(hours=1)
                    continue
                tick = _ms(moment.replace(minute=minute))
                if tick > LAST_MS:
                    break
                return tick
        except (OverflowError, ValueError):
            pass
        raise InvalidSchedule(f"{self.text!r} has no tick after {ms} before the year 10000")

    def ticks(self, after_ms: int, until_ms: int) -> Iterator[int]:
        """The ticks ``t`` with ``after_ms < t <= until_ms``, in order."""
        check_ms("until_ms", until_ms)
        tick = after_ms
        while tick < until_ms:
            tick = self.next_after(tick)
            if tick > until_ms:
                return
            yield tick

    def latest(self, after_ms: int, until_ms: int, limit: int) -> tuple[list[int], int]:
        """The last ``limit`` ticks of ``(after_ms, until_ms]`` in order, and how many the window holds."""
        kept: deque[int] = deque(maxlen=check_int("limit", limit, 0))
        count = 0
        for tick in self.ticks(after_ms, until_ms):
            kept.append(tick)
            count += 1
        return list(kept), count


@dataclass(frozen=True, slots=True)
class Interval:
    """A tick at every multiple of ``every_ms`` since the epoch (UTC)."""

    every_ms: int

    def __post_init__(self) -> None:
        every: object = self.every_ms
        if isinstance(every, bool) or not isinstance(every, int) or not MIN_EVERY_MS <= every <= MAX_EVERY_MS:
            raise InvalidSchedule(
                f"an interval is an int from {MIN_EVERY_MS} ms to {MAX_EVERY_MS} ms (366 days), got {every!r}"
            )

    @property
    def text(self) -> str:
        return f"@every {self.every_ms}ms"

    @property
    def canonical(self) -> str:
        return f"every {self.every_ms}ms"

    def matches(self, ms: int) -> bool:
        return check_ms("ms", ms) % self.every_ms == 0

    def next_after(self, ms: int) -> int:
        tick = (check_ms("ms", ms) // self.every_ms + 1) * self.every_ms
        if tick > LAST_MS:
            raise InvalidSchedule(f"{self.text!r} has no tick after {ms} before the year 10000")
        return tick

    def ticks(self, after_ms: int, until_ms: int) -> Iterator[int]:
        check_ms("until_ms", until_ms)
        first = (check_ms("after_ms", after_ms) // self.every_ms + 1) * self.every_ms
        return iter(range(first, until_ms + 1, self.every_ms))

    def latest(self, after_ms: int, until_ms: int, limit: int) -> tuple[list[int], int]:
        first = (check_ms("after_ms", after_ms) // self.every_ms + 1) * self.every_ms
        window = range(first, check_ms("until_ms", until_ms) + 1, self.every_ms)
        return list(window[max(0, len(window) - check_int("limit", limit, 0)) :]), len(window)


Timetable = Cron | Interval


def parse(text: object) -> Timetable:
    """The timetable ``text`` describes (see the module doc); InvalidSchedule when it describes none."""
    if not isinstance(text, str):
        raise InvalidSchedule(
            f"a schedule is a str (a cron expression or '@every ...'), got {type(text).__name__}"
        )
    if len(text) > MAX_TEXT or not _TEXT.fullmatch(text):
        raise InvalidSchedule(
            f"a schedule is at most {MAX_TEXT} printable ASCII characters, got {text[:40]!r}"
        )
    stripped = text.strip()
    if not stripped:
        raise InvalidSchedule("a schedule is a cron expression or '@every ...', got an empty text")
    word, *rest = stripped.split(None, 1)
    if word.lower() == "@every":
        return _every("".join(rest).strip().lower(), text)
    if stripped.startswith("@"):
        if stripped.lower() not in ALIASES:
            known = ", ".join(ALIASES)
            raise InvalidSchedule(f"unknown schedule alias {stripped!r}: known are {known} and @every")
        return _cron(ALIASES[stripped.lower()], text)
    return _cron(stripped, text)


def _every(duration: str, text: str) -> Interval:
    if not _DURATION.fullmatch(duration):
        raise InvalidSchedule(
            f"'@every' takes a duration such as 500ms, 2s, 1h30m (units ms s m h d), got {text!r}"
        )
    return Interval(sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(duration)))


def _cron(expression: str, text: str) -> Cron:
    fields = expression.split()
    if len(fields) != 5:
        raise InvalidSchedule(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)} in {text!r}"
        )
    minutes, hours, days, months, weekdays = (_field(field, index) for index, field in enumerate(fields))
    day_or = not fields[2].startswith("*") and not fields[4].startswith("*")
    cron = Cron(text.strip(), minutes, hours, days, months, weekdays, day_or)
    # A day rule that needs the day of month can only fail a month that lacks every listed day (the
    # weekdays of a given date run through all seven over the years, February 29th's included).
    if not day_or and not any(d <= _DAYS_IN_MONTH[m - 1] for m in cron.months for d in cron.days):
        raise InvalidSchedule(f"{text!r} never fires: none of its months has one of its days of the month")
    return cron


def _field(text: str, index: int) -> tuple[int, ...]:
    name, low, high = _FIELDS[index]
    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = _number(step_text, f"the step of {name}", 1, high - low + 1) if slash else 1
        if base == "*":
            start, end = low, (6 if index == 4 else high)
        else:
            first, dash, last = base.partition("-")
            if slash and not dash:
                raise InvalidSchedule(f"{name}: a step follows * or a range (a-b/s), got {part!r}")
            start = _value(first, index)
            end = _value(last, index) if dash else start
            if start > end:
                raise InvalidSchedule(f"{name}: the range {base!r} runs backwards")
        values.update(range(start, end + 1, step))
    if 7 in values and index == 4:
        values.discard(7)
        values.add(0)
    return tuple(sorted(values))


def _value(text: str, index: int) -> int:
    name, low, high = _FIELDS[index]
    named = _NAMES.get(index, {}).get(text.upper())
    return named if named is not None else _number(text, name, low, high)


def _number(text: str, name: str, low: int, high: int) -> int:
    if not _NUMBER.fullmatch(text):
        raise InvalidSchedule(f"{name}: expected a number from {low} to {high}, got {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise InvalidSchedule(f"{name} is {low}-{high}, got {value}")
    return value
