"""What ``echomq`` commands print: JSON documents (a job's bytes as their size, UTF-8 text and base64),
and the readable text of the stats, a job, the dead jobs and a sweep."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any

from echomq.inspection import JobInfo
from echomq.stats import Stats
from echomq.sweep import SweepReport


def _bytes_json(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {"size": len(data), "text": text, "base64": base64.b64encode(data).decode()}


def job_json(info: JobInfo) -> dict[str, Any]:
    out = asdict(info)
    out["state"] = info.state.value
    out["payload"] = _bytes_json(info.payload)
    out["result"] = _bytes_json(info.result)
    return out


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def stats_text(tag: str, stats: Stats) -> str:
    depth = stats.as_dict()["depth"]
    assert isinstance(depth, dict)
    lines = [
        f"bus {tag}: " + "  ".join(f"{name}={count}" for name, count in depth.items()),
        "counters: " + "  ".join(f"{name}={count}" for name, count in stats.counters.items()),
        f"lanes: {stats.lanes_total} waiting, fairness lag max {stats.lag_max}",
    ]
    lines += [f"  {lane.lane}  depth={lane.depth}  lag={lane.lag}" for lane in stats.lanes]
    return "\n".join(lines)


def job_text(data: dict[str, Any]) -> str:
    """A job's fields (from :func:`job_json`), one a line; its payload and result cut to 200 characters."""
    keys = ("job", "state", "lane", "location", "attempts", "tries", "max_attempts", "owner", "error")
    lines = [f"{key:>12}: {data[key]}" for key in keys]
    timestamps = ("created_ms", "deadline_ms", "finished_ms", "late_ms")
    lines += [f"{key:>12}: {data[key]}" for key in timestamps if data[key] is not None]
    for key in ("payload", "result"):
        if data[key] is not None:
            shown = data[key]["text"] if data[key]["text"] is not None else "base64:" + data[key]["base64"]
            lines.append(f"{key:>12}: {shown[:200]}")
    return "\n".join(lines)


def dead_text(tag: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return f"no dead jobs on bus {tag}"
    return "\n".join(
        f"{row['job']}  lane={row['lane']}  tries={row['tries']}  error={row['error']}" for row in rows
    )


def sweep_text(report: SweepReport) -> str:
    return (
        f"promoted={report.promoted} reclaimed={report.reclaimed} dead={report.dead} "
        f"trimmed={report.trimmed} next_due_ms={report.next_due_ms}"
    )
