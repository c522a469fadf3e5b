"""make bench's runner: every part's rows in one table, saved as JSON and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

from bench.drain import curve
from bench.report import Figure, Part, save
from bench.run import game_figures, parse


def test_save_writes_every_figure_with_its_ratio_and_each_parts_points(tmp_path: Path) -> None:
    """The JSON holds each figure with ratio and met, each part's points and info; the Markdown the table."""
    parts = {
        "drain": Part([Figure("enqueue", 9.0, "jobs/s", 10.0, "raw", 0.9)], drain=[(200.0, 7000.0)]),
        "load": Part(
            [Figure("p99", 30.0, "ms", None, "", 25.0, "value", "lower")], latency=[(250.0, 2.0, 9.0)]
        ),
    }
    written = save(tmp_path / "out", "bench-latest", "2 cores · test", parts, {"machine": {"nproc": 2}})
    assert [p.name for p in written] == ["bench-latest.json", "bench-latest.md"]
    data = json.loads(written[0].read_text())
    assert [f["name"] for f in data["figures"]] == ["enqueue", "p99"]
    assert data["figures"][0]["ratio"] == 0.9
    assert data["figures"][0]["met"] is True
    assert data["figures"][1]["met"] is False
    assert data["parts"]["drain"]["drain_points"] == [[200.0, 7000.0]]
    assert data["parts"]["load"]["latency_points"] == [[250.0, 2.0, 9.0]]
    assert data["machine"] == {"nproc": 2}
    markdown = written[1].read_text().splitlines()
    assert markdown[0] == "2 cores · test"
    assert sum(1 for line in markdown if line.startswith(("| enqueue |", "| p99 |"))) == 2


def test_game_rows_become_figures_with_their_unit_and_direction() -> None:
    """The unit comes out of the name's parentheses; a row in ms is better lower, others higher."""
    rows = [
        ("scored, 1 worker process (guesses/s)", 4000.0, 9000.0, "raw claim.lua + score.lua"),
        ("submit → scored at idle, p99 (ms)", 7.0, 1.2, "raw serial p99"),
    ]
    scored, p99 = game_figures(rows)
    assert (scored.name, scored.unit, scored.better, scored.target) == (
        "scored, 1 worker process",
        "guesses/s",
        "higher",
        None,
    )
    assert (p99.unit, p99.better, p99.target) == ("ms", "lower", None)


def test_drain_points_are_read_from_figures_named_by_concurrency() -> None:
    """Only the drain-against-concurrency figures become (concurrency, jobs/s) points."""
    figures = [
        Figure("drain, 1 worker process", 7000.0, "jobs/s", 11000.0, "raw"),
        Figure("drain, 1 process, concurrency 10", 5000.0, "jobs/s", 11000.0, "raw"),
        Figure("drain, 1 process, concurrency 200", 7000.0, "jobs/s", 11000.0, "raw"),
        Figure("drain, worker CPU per job (1 process)", 90.0, "µs/job", 40.0, "raw"),
    ]
    assert curve(figures) == [(10, 5000.0), (200, 7000.0)]


def test_one_command_line_sizes_every_part_and_quick_makes_each_smaller() -> None:
    """--quick lowers each part's default size; an explicit size still wins over it."""
    full, quick = parse([]), parse(["--quick"])
    for size in (
        "enqueue_jobs",
        "pickup_samples",
        "memory_jobs",
        "drain_jobs",
        "load_seconds",
        "game_guesses",
        "scale_jobs",
        "cluster_jobs",
        "cluster_seconds",
        "soak_jobs",
    ):
        assert getattr(quick, size) < getattr(full, size)
    assert parse(["--quick", "--soak-jobs", "777"]).soak_jobs == 777
