"""The conformance suite's memory check (codemojex.conformance.memory.bounds): it flags trimming that falls
behind the completions, and allows what the design leaves for the sweep when the work stops."""

from __future__ import annotations

from codemojex.conformance.memory import Sample, bounds

TTL_MS, WINDOW_MS, SLACK, SWEEP_MS = 1000, 3000, 200, 10_000
RATE = 1000  # completions per second while the work runs


def run(past_ttl: list[int], working_s: int, every_ms: int = 500) -> list[Sample]:
    """One sample every ``every_ms``: completions at RATE for ``working_s`` seconds, then none; each
    sample shows the given rows past their TTL (done set: the TTL's worth of completions plus those)."""
    samples = []
    for index, rows in enumerate(past_ttl):
        at = index * every_ms
        completed = RATE * min(at, working_s * 1000) // 1000
        fresh = completed - RATE * max(0, min(at, working_s * 1000) - TTL_MS) // 1000
        samples.append(Sample(at, completed, fresh + rows, rows, 1 << 20))
    return samples


def check(samples: list[Sample]) -> list[str]:
    return bounds(samples, TTL_MS, WINDOW_MS, SLACK, SWEEP_MS)


def test_a_bus_that_trims_as_it_completes_passes():
    assert check(run([0] * 40, working_s=30)) == []


def test_rows_past_their_ttl_that_grow_while_jobs_complete_are_flagged():
    """At 1,000 completions a second, rows past their TTL growing by 500 a sample outrun the window."""
    problems = check(run([500 * i for i in range(40)], working_s=30))
    assert len(problems) == 2
    assert "trimming falls behind the completions" in problems[0]
    assert problems[1].startswith("the done set held")


def test_the_rows_left_when_the_work_stops_may_wait_one_sweep_period():
    """The work stops at 10 s; the last second's rows expire with no finish to trim them and sit there
    until the sweep, up to a sweep period later: not a violation."""
    tail = [0] * 22 + [900] * 18  # samples at 11 s .. 19.5 s: within the sweep period after the stop
    assert check(run(tail, working_s=10)) == []


def test_rows_that_outlive_a_sweep_period_after_the_work_stops_are_flagged():
    """Still there 15 s after the work stopped (longer than a sweep period over the bound): flagged."""
    tail = [0] * 22 + [900] * 30  # through 25.5 s
    problems = check(run(tail, working_s=10))
    assert any("trimming falls behind the completions" in p for p in problems)


def test_rows_overdue_past_a_sweep_period_are_flagged_even_in_one_sample():
    """One reading (a recheck after the run) of 1,000 rows past their TTL by more than the window and a
    sweep period: no sweep trimmed them, whatever the completions did."""
    [last] = run([0], working_s=0)
    overdue = Sample(last.at_ms, last.completed, 1000, 1000, last.used_memory, overdue=1000)
    problems = check([overdue])
    assert len(problems) == 1
    assert "no sweep trimmed them" in problems[0]
