"""The benchmark's table: a figure against its reference and its target."""

from __future__ import annotations

from bench.report import Figure, table


def test_a_ratio_target_is_judged_on_value_over_reference() -> None:
    fast = Figure("enqueue", 9_500, "jobs/s", 10_000, "raw loop", target=0.9)
    slow = Figure("enqueue", 8_000, "jobs/s", 10_000, "raw loop", target=0.9)
    assert fast.ratio == 0.95
    assert fast.met is True
    assert slow.met is False


def test_a_value_target_is_judged_on_the_value_and_lower_can_be_better() -> None:
    quick = Figure("pickup p50", 0.5, "ms", 0.1, "PING p50", target=0.6, on="value", better="lower")
    late = Figure("pickup p50", 0.7, "ms", 0.1, "PING p50", target=0.6, on="value", better="lower")
    assert quick.met is True
    assert late.met is False
    assert quick.target_text == "≤ 0.6 ms"


def test_a_figure_without_target_or_reference_is_neither_met_nor_missed() -> None:
    plain = Figure("worker CPU", 42.0, "µs/job", None, "")
    assert plain.ratio is None
    assert plain.met is None
    assert plain.target_text == ""


def test_the_table_has_a_row_per_figure_and_marks_a_miss() -> None:
    rows = [
        Figure("a", 1.0, "x", 2.0, "ref", target=0.9),
        Figure("b", 3.0, "y", None, ""),
    ]
    text = table(rows).splitlines()
    assert len(text) == 2 + len(rows)
    assert "**no**" in text[2]
    assert "| b |" in text[3]
