"""The chart of ``make bench``: submit→scored latency against offered load, and drain against worker
concurrency, as one PNG.

The functions take plain lists of points, so any part can feed them: the open-loop load generator
(``bench.load``) gives ``(offered guesses/s, p50 ms, p99 ms)``, the drain part (``bench.drain``) gives
``(worker concurrency, jobs/s)``. A panel with no points says so instead of drawing nothing. matplotlib
(the ``bench`` extra) draws through its object API: no pyplot, no display, no backend to choose.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure as MplFigure

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LatencyPoint = tuple[float, float, float]  # offered load (per second), p50 ms, p99 ms
DrainPoint = tuple[float, float]  # worker concurrency, jobs/s

TARGET_P99_MS = 25.0  # issue 14: submit→scored p99 at the highest rate the machine sustains


def draw(
    latency: Sequence[LatencyPoint],
    drain: Sequence[DrainPoint],
    path: Path,
    *,
    title: str = "",
    target_p99_ms: float | None = TARGET_P99_MS,
) -> Path:
    """Write the two panels to ``path`` (PNG) and return it; points are sorted by their x."""
    fig = MplFigure(figsize=(11, 4.2), layout="constrained")  # no pyplot: no global state, no display
    left, right = fig.subplots(1, 2)
    _latency_panel(left, sorted(latency), target_p99_ms)
    _drain_panel(right, sorted(drain))
    if title:
        fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=110)  # a Figure made without pyplot saves through Agg
    return path


def _no_points(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no points\n({what} not measured in this run)", ha="center", va="center")


def _latency_panel(ax: Axes, points: list[LatencyPoint], target: float | None) -> None:
    ax.set_title("submit → scored latency against offered load")
    ax.set_xlabel("offered load (guesses/s, open loop)")
    ax.set_ylabel("latency (ms, log scale)")
    if not points:
        _no_points(ax, "bench.load")
        return
    ax.set_yscale("log")  # a few ms below the machine's edge, seconds past it: both stay readable
    rates = [p[0] for p in points]
    ax.plot(rates, [p[1] for p in points], marker="o", label="p50")
    ax.plot(rates, [p[2] for p in points], marker="s", label="p99")
    if target is not None:
        ax.axhline(target, linestyle="--", color="grey", label=f"p99 target {target:g} ms")
    ax.legend()


def _drain_panel(ax: Axes, points: list[DrainPoint]) -> None:
    ax.set_title("drain against worker concurrency (1 process)")
    ax.set_xlabel("worker concurrency")
    ax.set_ylabel("jobs/s")
    if not points:
        _no_points(ax, "bench.drain")
        return
    ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
    if len(points) > 1 and points[0][0] > 0 and points[-1][0] / points[0][0] >= 20:
        ax.set_xscale("log")
    ticks = sorted({p[0] for p in points})
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.set_ylim(bottom=0)


def redraw(saved: Path) -> Path:
    """Draw the chart again from a saved ``bench-latest.json`` (every part's points), next to it."""
    data = json.loads(saved.read_text())
    parts = data["parts"].values()
    latency = [(float(a), float(b), float(c)) for part in parts for a, b, c in part["latency_points"]]
    drain = [(float(a), float(b)) for part in parts for a, b in part["drain_points"]]
    return draw(latency, drain, saved.with_suffix(".png"), title=title_for(data.get("machine", {})))


def title_for(machine: dict[str, Any]) -> str:
    """The chart's title: the machine the figures come from (bench.run's ``machine``)."""
    return (
        f"EchoMQ · {machine.get('nproc')} cores · redis {machine.get('redis_version')} · "
        f"{machine.get('when_utc')} UTC"
    )


if __name__ == "__main__":
    print(redraw(Path(sys.argv[1])))
