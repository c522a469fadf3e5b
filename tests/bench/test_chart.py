"""The benchmark's chart: a readable PNG from plain lists of points, whatever parts ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.chart import draw, redraw
from bench.report import Figure, Part, save
from matplotlib import image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _read(path: Path) -> Any:
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    return image.imread(path)


def test_both_panels_are_drawn_to_a_readable_png(tmp_path: Path) -> None:
    """Latency points (rate, p50, p99) and drain points (concurrency, jobs/s) make one PNG image."""
    latency = [(1000.0, 4.0, 19.0), (250.0, 1.5, 3.0), (500.0, 2.0, 6.5)]
    drain = [(200.0, 7000.0), (1.0, 900.0), (10.0, 5200.0), (50.0, 6900.0)]
    out = draw(latency, drain, tmp_path / "results" / "chart.png", title="made-up points")
    assert out == tmp_path / "results" / "chart.png"
    pixels = _read(out)
    height, width = pixels.shape[:2]
    assert width > height > 100
    assert pixels.min() < pixels.max()  # something was drawn, not a blank canvas


def test_a_run_without_points_still_writes_the_chart(tmp_path: Path) -> None:
    """No load or drain points (those parts did not run): the PNG is still written and readable."""
    out = draw([], [], tmp_path / "empty.png")
    assert _read(out).shape[0] > 100


def test_the_chart_is_redrawn_from_a_saved_run_next_to_its_json(tmp_path: Path) -> None:
    """Every part's points in bench-latest.json are drawn again to bench-latest.png beside it."""
    parts = {
        "drain": Part([Figure("drain", 1.0, "jobs/s", None, "")], drain=[(1.0, 800.0), (50.0, 6000.0)]),
        "load": Part([], latency=[(250.0, 2.0, 9.0), (500.0, 3.0, 14.0)]),
    }
    saved, _ = save(tmp_path, "bench-latest", "header", parts, {"machine": {"nproc": 2}})
    out = redraw(saved)
    assert out == tmp_path / "bench-latest.png"
    assert _read(out).shape[0] > 100
