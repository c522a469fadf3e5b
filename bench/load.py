"""The player's path under load: an open-loop load generator for the web host, in a process of its own.

``.venv/bin/python -m bench.load`` (``--seconds 5`` for a quick run) starts a redis-server, a web host
(``python -m codemojex.web``, ``--hosts N`` processes sharing the port) and score workers (``codemojex
worker``), each a process of its own, on one open round with 1,000 players, and measures:

1. **The HTTP limit against the Redis limit.** Guesses POSTed as fast as the host answers (every player's
   connection at once, closed loop; after :data:`WARM_UP` untimed ones), against the raw pipelined
   ``submit.lua`` loop of the same run (:func:`bench.game_limits.limit_submit`); with the host processes'
   CPU per request (µs, from ``/proc``) and the Redis calls per request (``INFO commandstats``: EVALSHA
   calls and every command, those run inside scripts included), counted while no worker runs.
2. **Latency against offered load.** Open loop: guess *i* of a phase is sent at ``start + i / rate``
   whatever the replies (a free keep-alive connection is taken, or a new one opened), so a slow host shows
   as queueing, not as a slower client. At each rate (250, 500, 1,000, 1,500 and 2,000 guesses a second by
   default, ``--seconds`` each; the target applies to the first three, the others find the edge) it prints
   submit→scored p50 / p99 / max (from the moment the request was due to the ``scored`` time of the
   guess's record, Redis server clock: the generator and Redis share the machine's clock), the reply's own
   p50 / p99, and the errors by kind (a non-202 answer by its status, a broken connection, a guess not
   scored in time); and the highest rate whose p99 is within :data:`TARGET_P99_MS` with no error.

Figures, never assertions. The host runs ``--unlimited`` (the host's throughput, not its rate limits).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench import load_setup as setup
from bench.arena import arena
from bench.game_limits import limit_submit
from bench.processes import cpu_s, stop
from bench.report import Figure, Part, percentile, table
from bench.traffic import closed_loop, open_loop
from codemojex.keys import JOB, GameKeys, guess_of
from echomq.testing.server import RedisProcess

RATES = (250, 500, 1000, 1500, 2000)  # issue 14's three, then past them: the highest sustained is shown
TARGET_RATES = (250, 500, 1000)  # the rates whose p99 has the target (past them, the machine's edge)
PLAYERS = 1000
WARM_UP = 1000  # guesses POSTed, untimed, before the closed loop's
TARGET_P99_MS = 25.0
TARGET_HTTP_RATIO = 0.2
SCORED_WAIT_S = 60.0  # a guess not scored this long after its phase ends counts as an error


@dataclass(frozen=True, slots=True)
class Point:
    """One offered rate: submit→scored p50 / p99 / max (ms), the reply's p50 / p99 (ms), the errors."""

    rate: float
    p50: float
    p99: float
    max: float
    errors: int
    sent: int
    reply_p50: float
    reply_p99: float
    achieved: float  # guesses sent per second (the schedule kept, or not)
    why: str = ""  # the errors by kind: an HTTP status, "broken" (the connection), "unscored" (in time)


@dataclass
class Load:
    """What :func:`measure` found: the table rows, the chart's points and the counts behind them."""

    figures: list[Figure]
    points: list[Point]
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def sustained(self) -> float | None:
        """The highest offered rate with p99 within the target and no error."""
        return sustained(self.points)


def sustained(points: list[Point]) -> float | None:
    """The highest offered rate of ``points`` with p99 within the target and no error."""
    good = [p.rate for p in points if p.p99 <= TARGET_P99_MS and p.errors == 0]
    return max(good) if good else None


def _scored(client: redis.Redis, keys: GameKeys, jobs: list[str], deadline: float) -> dict[str, int]:
    """Each job's record's ``scored`` time (ms, server clock), waiting until all are scored or ``deadline``
    (monotonic)."""
    found: dict[str, int] = {}
    while True:
        missing = [job for job in jobs if job not in found]
        for i in range(0, len(missing), 1000):
            pipe = client.pipeline(transaction=False)
            for job in missing[i : i + 1000]:
                pipe.hget(keys.guess(guess_of(job)), "scored")
            for job, scored in zip(missing[i : i + 1000], pipe.execute(), strict=True):
                if scored is not None:
                    found[job] = int(scored)
        if len(found) == len(jobs) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def phase(client: redis.Redis, keys: GameKeys, port: int, requests: list[bytes], rate: float) -> Point:
    results, achieved = asyncio.run(open_loop(port, requests, rate))
    jobs = [job for _, _, job in results if job.startswith(JOB)]
    scored = _scored(client, keys, jobs, time.monotonic() + SCORED_WAIT_S)
    latencies = [scored[job] - due for due, _, job in results if job in scored]
    replies = [replied for _, replied, job in results if job.startswith(JOB)]
    errors = len(results) - len(latencies)
    kinds = Counter(
        job if not job.startswith(JOB) else "unscored" for _, _, job in results if job not in scored
    )
    why = ", ".join(f"{kind} x{count}" for kind, count in kinds.most_common())
    return Point(
        rate,
        percentile(latencies, 50),
        percentile(latencies, 99),
        max(latencies, default=float("nan")),
        errors,
        len(results),
        percentile(replies, 50),
        percentile(replies, 99),
        achieved,
        why,
    )


def measure(
    url: str,
    *,
    seconds: float,
    rates: tuple[float, ...] = RATES,
    players: int = PLAYERS,
    hosts: int = 1,
    workers: int = 2,
    concurrency: int = 64,
    fill: int = 5000,
) -> Load:
    """Every figure of the player's path on the server at ``url`` (see the module doc)."""
    logs = Path(tempfile.mkdtemp(prefix="bench-load-"))
    client = redis.Redis.from_url(url)
    limit = arena(url, "load-limit", 100, fill)
    raw, _ = limit_submit(client, limit, fill)
    warm = min(fill, WARM_UP)
    total = warm + fill + sum(int(rate * seconds) for rate in rates)
    a = arena(url, "load", 1, 0)
    keys = GameKeys(a.tag)
    info: dict[str, Any] = {"seconds": seconds, "players": players, "hosts": hosts, "workers": workers}
    with setup.host(url, a.tag, hosts, logs) as (port, host):
        joined = asyncio.run(setup.join(port, players))
        tokens = [token for _, token in joined]
        asyncio.run(
            setup.fund(url, a.tag, a.round_id, [player for player, _ in joined], total // players + 2)
        )
        # Untimed first: the host learns the round on the routes' path, opens its connections, loads its
        # scripts; the figure is the steady state.
        _, warm_errors = asyncio.run(closed_loop(port, setup.plan(a, tokens, warm, port), min(players, 100)))
        requests = setup.plan(a, tokens, fill, port)
        cpu, calls = cpu_s(host.pid), setup.commands(client)
        http, fill_errors = asyncio.run(closed_loop(port, requests, min(players, 100)))
        cpu, after = cpu_s(host.pid) - cpu, setup.commands(client)
        info |= {
            "http_guesses_per_s": http,
            "raw_submit_per_s": raw,
            "fill_errors": fill_errors,
            "host_cpu_us_per_guess": cpu / fill * 1e6,
            "evalsha_per_guess": (after[0] - calls[0]) / fill,
            "commands_per_guess": (after[1] - calls[1] - 1) / fill,  # less the INFO call itself
        }
        procs = setup.workers(url, a.tag, workers, concurrency, logs)
        try:
            deadline = time.monotonic() + SCORED_WAIT_S
            before = warm + fill - warm_errors - fill_errors
            while client.zcard(keys.scored(a.round_id)) < before and time.monotonic() < deadline:
                time.sleep(0.1)  # the fill's guesses scored before the first phase
            points = [
                phase(client, keys, port, setup.plan(a, tokens, int(rate * seconds), port), rate)
                for rate in rates
            ]
        finally:
            stop(procs)
    client.close()
    info["points"] = [_point_json(p) for p in points]
    info["logs"] = str(logs)
    return Load(_figures(info, points), points, info)


def _point_json(point: Point) -> dict[str, float | str]:
    return {name: getattr(point, name) for name in Point.__slots__}


def _figures(info: dict[str, Any], points: list[Point]) -> list[Figure]:
    rows = [
        Figure(
            f"guess POST over HTTP, {info['hosts']} host process(es), closed loop",
            info["http_guesses_per_s"],
            "guesses/s",
            info["raw_submit_per_s"],
            "raw pipelined submit.lua",
            target=TARGET_HTTP_RATIO,
        ),
        Figure("host CPU per guess POST", info["host_cpu_us_per_guess"], "µs", None, "host processes' CPU"),
        Figure(
            "Redis calls per guess POST (EVALSHA)", info["evalsha_per_guess"], "calls", None, "commandstats"
        ),
    ]
    for p in points:
        name = f"submit → scored at {p.rate:g} guesses/s offered"
        reference = f"p50 {p.p50:.1f} ms, max {p.max:.1f} ms, {p.errors} errors" + (
            f" ({p.why})" if p.why else ""
        )
        target = TARGET_P99_MS if p.rate in TARGET_RATES else None
        rows.append(Figure(f"{name}, p99", p.p99, "ms", None, reference, target, "value", "lower"))
    offered = ", ".join(f"{p.rate:g}" for p in points)
    best = sustained(points)
    name = f"highest offered rate with submit → scored p99 ≤ {TARGET_P99_MS:g} ms and no error"
    rows.append(Figure(name, best or 0.0, "guesses/s", None, f"of {offered} offered"))
    return rows


def print_load(load: Load) -> None:
    info = load.info
    print(
        f"\nThe player's path · {info['players']} players · {info['hosts']} host process(es) · "
        f"{info['workers']} score worker(s) · {info['seconds']:g} s a rate\n"
    )
    print(table(load.figures))
    print("\n| offered/s | sent/s | submit→scored p50 | p99 | max | reply p50 | reply p99 | errors |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in load.points:
        print(
            f"| {p.rate:g} | {p.achieved:,.0f} | {p.p50:.1f} ms | {p.p99:.1f} ms | {p.max:.1f} ms | "
            f"{p.reply_p50:.1f} ms | {p.reply_p99:.1f} ms | {p.errors} {p.why} |"
        )
    sustained = load.sustained
    shown = f"{sustained:g} guesses/s" if sustained is not None else "none of the rates tried"
    print(f"\nhighest rate with p99 ≤ {TARGET_P99_MS:g} ms and no error: {shown}")
    print(
        f"(closed loop: {info['http_guesses_per_s']:,.0f} guesses/s over HTTP, "
        f"{info['host_cpu_us_per_guess']:,.0f} µs host CPU and {info['commands_per_guess']:.1f} Redis "
        "commands (scripts' included) per guess)"
    )


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument(
        "--load-seconds", type=float, default=5.0 if quick else 30.0, help="each rate's phase"
    )
    parser.add_argument("--load-fill", type=int, default=1000 if quick else 5000, help="closed-loop guesses")


def bench_part(args: argparse.Namespace) -> Part:
    """The player's path on a server with AOF on (``appendfsync everysec``, as in production); then the
    target's highest rate again on one without AOF, so the share of the disk's fsync in the tail shows."""
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        load = measure(server.url, seconds=args.load_seconds, fill=args.load_fill)
    rate = max(TARGET_RATES)
    with RedisProcess(appendonly=False) as server:
        bare = measure(server.url, seconds=args.load_seconds, rates=(rate,), fill=min(args.load_fill, 1000))
    aof = next(p for p in load.points if p.rate == rate)
    point = bare.points[0]
    figures = [
        *load.figures,
        Figure(
            f"submit → scored at {rate:g} guesses/s offered, p99, Redis without AOF",
            point.p99,
            "ms",
            aof.p99,
            f"the same with AOF everysec; p50 {point.p50:.1f} ms, {point.errors} errors",
            better="lower",
        ),
    ]
    latency = [(p.rate, p.p50, p.p99) for p in load.points]
    info = {**load.info, "sustained": load.sustained, "without_aof": _point_json(point)}
    return Part(figures, latency=latency, info=info)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0, help="each rate's phase (default 30)")
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="guesses/s offered")
    parser.add_argument("--players", type=int, default=PLAYERS)
    parser.add_argument("--hosts", type=int, default=1, help="web host processes sharing the port")
    parser.add_argument("--workers", type=int, default=2, help="score worker processes")
    parser.add_argument("--fill", type=int, default=5000, help="guesses of the closed-loop HTTP limit")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures and points here")
    args = parser.parse_args(argv)
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        load = measure(
            server.url,
            seconds=args.seconds,
            rates=tuple(args.rates),
            players=args.players,
            hosts=args.hosts,
            workers=args.workers,
            fill=args.fill,
        )
    print_load(load)
    if args.json is not None:
        data = {"figures": [f.to_json() for f in load.figures], **load.info}
        args.json.write_text(json.dumps(data, indent=2, default=str))


if __name__ == "__main__":
    main()
