"""One row of ``make bench``'s table: a figure, what it is compared with in the same run, and its target.

Every part of the benchmark (enqueue, pickup and idle cost, memory, drain, the player's path, scale)
returns :class:`Figure` rows (in a :class:`Part`, with the chart's points); :mod:`bench.run` prints them
as one table and :func:`save` writes them as JSON and Markdown. A target
bounds either the ratio to the reference (``on="ratio"``: "at least 0.9 of the raw loop") or the value
itself (``on="value"``: "p50 at most 0.6 ms"). Figures are figures, never assertions: a missed target is
printed as missed, nothing fails because a number is low.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile of ``values`` by nearest rank (NaN of none): every part's p50 and p99."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass(frozen=True, slots=True)
class Figure:
    """``value`` (in ``unit``) against ``reference`` (described by ``reference_as``), and its target."""

    name: str
    value: float
    unit: str
    reference: float | None
    reference_as: str
    target: float | None = None
    on: Literal["ratio", "value"] = "ratio"
    better: Literal["higher", "lower"] = "higher"

    @property
    def ratio(self) -> float | None:
        """``value / reference``, or None without a (non-zero) reference."""
        if not self.reference:
            return None
        return self.value / self.reference

    @property
    def met(self) -> bool | None:
        """Whether the target is met; None when there is no target (or no ratio to judge it by)."""
        if self.target is None:
            return None
        measured = self.ratio if self.on == "ratio" else self.value
        if measured is None:
            return None
        return measured >= self.target if self.better == "higher" else measured <= self.target

    @property
    def target_text(self) -> str:
        """The target as printed: '≥ 0.9x', '≤ 0.6 ms', or '' for none."""
        if self.target is None:
            return ""
        sign = "≥" if self.better == "higher" else "≤"
        return f"{sign} {self.target:g}x" if self.on == "ratio" else f"{sign} {self.target:g} {self.unit}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "met": self.met}


def table(figures: list[Figure]) -> str:
    """The figures as one Markdown table: figure, value, reference, ratio, target, met."""
    lines = [
        "| figure | EchoMQ | compared with | ratio | target | met |",
        "|---|---:|---|---:|---:|:---:|",
    ]
    for f in figures:
        ref = "" if f.reference is None else f"{f.reference:,.2f} ({f.reference_as})"
        ratio = "" if f.ratio is None else f"{f.ratio:.2f}"
        met = {True: "yes", False: "**no**", None: ""}[f.met]
        lines.append(f"| {f.name} | {f.value:,.2f} {f.unit} | {ref} | {ratio} | {f.target_text} | {met} |")
    return "\n".join(lines)


@dataclass
class Part:
    """What one part of ``make bench`` measured: its figures, and the chart's points it has.

    ``latency`` points are ``(offered load per second, p50 ms, p99 ms)`` of submit→scored (the open-loop
    load generator's), ``drain`` points ``(worker concurrency, jobs/s)`` (see :mod:`bench.chart`);
    ``info`` is whatever else the part wants kept in the JSON (sizes, warnings, counts).
    """

    figures: list[Figure]
    latency: list[tuple[float, float, float]] = field(default_factory=list)
    drain: list[tuple[float, float]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def save(directory: Path, stem: str, header: str, parts: dict[str, Part], run: dict[str, Any]) -> list[Path]:
    """Write ``<stem>.json`` (every part's figures, points and info, and ``run``) and ``<stem>.md`` (the
    header line and the one table) to ``directory``; return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    figures = [f for part in parts.values() for f in part.figures]
    out = {
        **run,
        "figures": [f.to_json() for f in figures],
        "parts": {
            name: {
                "figures": [f.name for f in part.figures],
                "latency_points": part.latency,
                "drain_points": part.drain,
                "info": part.info,
            }
            for name, part in parts.items()
        },
    }
    json_path, md_path = directory / f"{stem}.json", directory / f"{stem}.md"
    json_path.write_text(json.dumps(out, indent=2, default=str) + "\n")
    md_path.write_text(f"{header}\n\n{table(figures)}\n")
    return [json_path, md_path]
