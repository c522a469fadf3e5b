"""``make bench``: every part's figures in one table, saved as JSON and Markdown, and the chart.

Each part is a module of ``bench`` run by name, in :data:`PARTS` order, each on a redis-server of its own
(so what one part leaves behind plays no part in the next). A part module provides
``add_arguments(parser, quick: bool)`` (its sizes, full or ``--quick``) and
``bench_part(args: argparse.Namespace) -> bench.report.Part`` (its figures, chart points and info);
bench.game's ``add_arguments`` takes no ``quick`` (its quick sizes are set here).

A part that raises is reported and the others still run. Output: the table on stdout, and
``bench/results/bench-latest.json`` (every figure, its target, ratio and whether met; each part's points
and info; the machine), ``bench-latest.md`` (the machine line and the table, for the README) and
``bench-latest.png`` (:mod:`bench.chart`).

    make bench                          # every part, full sizes
    make bench BENCH_ARGS=--quick       # small sizes: a smoke run in a few minutes
    make bench BENCH_ARGS='--parts drain,scale --scale-jobs 20000'
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import redis

from bench import chart, game
from bench.report import Figure, Part, save, table
from echomq.testing.server import RedisProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
STEM = "bench-latest"
# Run order: the cheap queue figures first, the long soak last (bench.queue holds the shared raw loops).
PARTS = ("enqueue", "pickup", "memory", "drain", "load", "game", "scale", "cluster", "soak")
_UNIT = re.compile(r"^(.*) \(([^()]+)\)$")


def game_figures(rows: list[tuple[str, float, float, str]]) -> list[Figure]:
    """bench/game.py's rows (figure with its unit in parentheses, value, limit, how) as Figure rows; a row
    in ms is better lower. (The game's rows have no target of their own: the player's path over HTTP is
    :mod:`bench.load`'s.)"""
    figures = []
    for name, value, limit, how in rows:
        match = _UNIT.match(name)
        label, unit = (match.group(1), match.group(2)) if match else (name, "")
        better: Literal["higher", "lower"] = "lower" if unit == "ms" else "higher"
        figures.append(Figure(label, value, unit, limit, how, better=better))
    return figures


def game_part(args: argparse.Namespace) -> Part:
    measured = game.from_arguments(args)
    return Part(game_figures(measured.rows), info=game.to_json(measured))


def run_part(name: str, module: ModuleType, args: argparse.Namespace) -> Part:
    if name == "game":
        return game_part(args)
    part: Part = module.bench_part(args)
    return part


def machine(redis_version: str) -> dict[str, Any]:
    """What the figures were measured on: cores, CPU model, Redis and Python versions, the date (UTC)."""
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "nproc": int(nproc) if nproc.isdigit() else None,
        "cpu": model or platform.processor(),
        "redis_version": redis_version,
        "python": platform.python_version(),
        "when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def _redis_version() -> str:
    with RedisProcess(appendonly=False) as server:
        client = redis.Redis.from_url(server.url)
        version = str(client.info("server")["redis_version"])
        client.close()
    return version


def parse(argv: list[str]) -> argparse.Namespace:
    quick = "--quick" in argv
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes for every part (a smoke run)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON, Markdown and PNG go")
    for name in PARTS:
        module = importlib.import_module(f"bench.{name}")
        if "quick" in inspect.signature(module.add_arguments).parameters:
            module.add_arguments(parser, quick=quick)
        else:  # bench.game's, and any part without a quick size: its own defaults
            module.add_arguments(parser)
    if quick:
        parser.set_defaults(game_guesses=2000, game_samples=50, game_players=50)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    wanted = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(wanted) - set(PARTS))
    if unknown:
        raise SystemExit(f"unknown parts: {', '.join(unknown)} (parts are {', '.join(PARTS)})")
    parts: dict[str, Part] = {}
    notes: list[str] = []
    for name in wanted:
        module = importlib.import_module(f"bench.{name}")
        started = time.monotonic()
        print(f"[bench] {name} ...", flush=True)
        try:
            parts[name] = run_part(name, module, args)
        except Exception:
            notes.append(f"{name}: failed, see the traceback above")
            traceback.print_exc()
            continue
        parts[name].info.setdefault("seconds", round(time.monotonic() - started, 1))
    host = machine(_redis_version())
    header = (
        f"{host['nproc']} cores ({host['cpu']}) · redis-server {host['redis_version']} · "
        f"Python {host['python']} · {host['when_utc']} UTC · `make bench"
        + (f" BENCH_ARGS='{' '.join(sys.argv[1:])}'`" if argv is None and sys.argv[1:] else "`")
    )
    figures = [f for part in parts.values() for f in part.figures]
    print(f"\n{header}\n\n{table(figures)}\n")
    for note in notes:
        print(f"({note})")
    run = {"machine": host, "arguments": vars(args), "notes": notes}
    written = save(args.out, STEM, header, parts, run)
    latency = [p for part in parts.values() for p in part.latency]
    drain = [p for part in parts.values() for p in part.drain]
    written.append(chart.draw(latency, drain, args.out / f"{STEM}.png", title=chart.title_for(host)))
    shown = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in written]
    print(f"(saved {', '.join(shown)})")


if __name__ == "__main__":
    main()
