"""Memory under load: finished rows are trimmed as fast as jobs finish, so Redis stays flat.

A done row is kept whole for the bus's ``result_ttl_ms``, then trimmed to a tombstone (and leaves the
``done`` set). If trimming falls behind the completions, rows past their TTL pile up and Redis grows
without bound however short the TTL. :class:`MemoryWatch` samples, during the whole run (not only at
its end, when an idle bus has long caught up), the server time, the ``completed`` counter, the size of
``done``, the done rows past their TTL and Redis's ``used_memory``. :func:`bounds` holds each sample to
what a bus that keeps up can show: rows past their TTL at most the completions of the last
``window_ms`` (plus ``slack``), and ``done`` at most the completions of the last TTL and window.

Trimming is amortised with the work (each finish trims a few expired rows) and the sweep trims on every
call. So when the work slows or stops, the rows finished last expire with no finish left to trim them,
and wait for the next sweep: a sample over those bounds is a violation only when the samples have been
over them for longer than a sweep period (trimming that falls behind for good stays over them). And
whatever the completions did, no more than ``slack`` done rows may be *overdue*: past their TTL by more
than the window and a sweep period, which the sweep (trimming on every call) would have removed.
"""

from __future__ import annotations

import asyncio
import contextlib
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

import redis

from echomq.keyspace import Keyspace

Client = Any  # a blocking redis.Redis


@dataclass(frozen=True, slots=True)
class Sample:
    at_ms: int  # server clock
    completed: int  # the bus's 'completed' counter
    done: int  # ZCARD done
    past_ttl: int  # done rows finished more than result_ttl_ms ago (not trimmed yet)
    used_memory: int  # bytes, INFO memory
    overdue: int = 0  # done rows past their TTL by more than the grace (a window and a sweep period)


def sample(client: Client, keys: Keyspace, result_ttl_ms: int, grace_ms: int) -> Sample:
    """One reading (a pipeline without MULTI: the figures are a few microseconds apart); ``grace_ms``
    past their TTL, done rows are overdue."""
    seconds, micros = client.time()
    now = int(seconds) * 1000 + int(micros) // 1000
    with client.pipeline(transaction=False) as pipe:
        pipe.hget(keys.stats, "completed")
        pipe.zcard(keys.done)
        pipe.zcount(keys.done, "-inf", now - result_ttl_ms)
        pipe.info("memory")
        pipe.zcount(keys.done, "-inf", now - result_ttl_ms - grace_ms)
        completed, done, past, info, overdue = pipe.execute()
    used = int(info["used_memory"])
    return Sample(now, int(completed or 0), int(done), int(past), used, int(overdue))


class MemoryWatch:
    """Samples every ``every_s`` until stopped; a sample Redis could not give (a crash, a pause) is
    skipped."""

    def __init__(
        self, client: Client, keys: Keyspace, result_ttl_ms: int, grace_ms: int, every_s: float = 0.5
    ) -> None:
        self.client = client
        self.keys = keys
        self.result_ttl_ms = result_ttl_ms
        self.grace_ms = grace_ms
        self.every_s = every_s
        self.samples: list[Sample] = []

    def take(self) -> Sample | None:
        try:
            taken = sample(self.client, self.keys, self.result_ttl_ms, self.grace_ms)
        except redis.RedisError:
            return None
        self.samples.append(taken)
        return taken

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.take)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)


def _completed_since(samples: list[Sample], index: int, ago_ms: int) -> int:
    """Completions in the ``ago_ms`` before sample ``index`` (from the earliest sample at or after
    that instant; all of them when the run is younger)."""
    times = [s.at_ms for s in samples]
    start = bisect_right(times, samples[index].at_ms - ago_ms) - 1
    base = samples[max(0, start)].completed if start >= 0 else 0
    return samples[index].completed - base


class _Lag:
    """One bound over the samples: the runs of samples over it, and those that outlast ``allowed_ms``."""

    def __init__(self, allowed_ms: int) -> None:
        self.allowed_ms = allowed_ms
        self.since: int | None = None  # when the current run of samples over the bound began (server ms)
        self.late = 0
        self.first = ""

    def late_since(self, at_ms: int, *, over: bool) -> int | None:
        """Whether the sample at ``at_ms`` is late: over the bound for longer than allowed (then when its
        run began), else None."""
        if not over:
            self.since = None
            return None
        self.since = at_ms if self.since is None else self.since
        if at_ms - self.since <= self.allowed_ms:
            return None
        self.late += 1
        return self.since

    def problem(self, samples: int) -> list[str]:
        return [f"{self.first} ({self.late} of {samples} samples)"] if self.late else []


def bounds(samples: list[Sample], result_ttl_ms: int, window_ms: int, slack: int, sweep_ms: int) -> list[str]:
    """Each sample where trimming lagged for longer than a sweep period (``sweep_ms``, the workers'):
    the first such sample of each kind, and how many there were."""
    rows, done = _Lag(sweep_ms), _Lag(sweep_ms)
    for index, s in enumerate(samples):
        recent = _completed_since(samples, index, window_ms)
        since = rows.late_since(s.at_ms, over=s.past_ttl > recent + slack)
        if since is not None and not rows.first:
            rows.first = (
                f"{s.past_ttl} done rows were past their TTL ({result_ttl_ms} ms) at server ms {s.at_ms}, "
                f"more than the last {window_ms} ms of completions ({recent}) + {slack} since {since}, "
                "over a sweep period: trimming falls behind the completions"
            )
        kept = _completed_since(samples, index, result_ttl_ms + window_ms)
        since = done.late_since(s.at_ms, over=s.done > kept + slack)
        if since is not None and not done.first:
            done.first = (
                f"the done set held {s.done} ids at server ms {s.at_ms}, more than the completions of the "
                f"last {result_ttl_ms + window_ms} ms ({kept}) + {slack} since {since}, over a sweep period"
            )
    problems = []
    overdue = [s for s in samples if s.overdue > slack]
    if overdue:
        problems.append(
            f"{overdue[0].overdue} done rows were past their TTL by more than {window_ms + sweep_ms} ms "
            f"(a window and a sweep period) at server ms {overdue[0].at_ms}: no sweep trimmed them "
            f"({len(overdue)} of {len(samples)} samples)"
        )
    return problems + rows.problem(len(samples)) + done.problem(len(samples))


def figures(samples: list[Sample], start: Sample | None, end: Sample | None) -> dict[str, int | None]:
    """The report's memory figures: ``used_memory`` at the start and end of the run and its sampled
    peak; the most rows past their TTL and the largest done set any sample saw."""
    return {
        "used_memory_start": start.used_memory if start else None,
        "used_memory_end": end.used_memory if end else None,
        "used_memory_peak": max((s.used_memory for s in samples), default=None),
        "past_ttl_max": max((s.past_ttl for s in samples), default=None),
        "done_max": max((s.done for s in samples), default=None),
        "samples": len(samples),
    }
