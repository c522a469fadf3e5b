"""The game benchmark: Codemojex's guess loop as ratios to the Redis limit, measured in one run.

Called from :func:`bench.queue.main` (``make bench``) on the queue benchmark's own redis-server, so the
queue figures and these are measured together; ``.venv/bin/python -m bench.game`` runs this part alone on
a server of its own and only prints.

The Redis limit for the game is a raw pipelined EVALSHA loop of the game's own scripts on a blocking
client: ``submit.lua`` (the charge and the admission in one script) and the pair ``claim.lua`` +
``score.lua`` (the claim, then the effect and the fenced completion in one script), with the scoring
itself (the engine) done before the clock starts. Then the game itself: guesses admitted through
:func:`codemojex.guesses.submit` by many players at once, scored by ``codemojex worker`` processes, and
the latency from calling submit to the scored event on the round's stream; and guesses POSTed to the
web host (``python -m codemojex.web``, a uvicorn process of its own) by every player at once, each over
its own keep-alive connection. Figures, never assertions: nothing here fails because a number is low (it fails
only when the bench itself is wrong, e.g. a guess it meant to admit was refused).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from bench.arena import SETTINGS, Arena, arena
from bench.game_limits import LEASE_MS, limit_latency, limit_score, limit_submit
from bench.processes import stop
from bench.queue import claim_span_ms
from bench.report import percentile
from codemojex.game import Game
from codemojex.guesses import Outcome, submit
from codemojex.keys import guess_of
from echomq import Settings
from echomq.testing.server import RedisProcess

WAKE_CAP = Settings().wake_cap  # the bus settings a Game.from_url has
# One table row: (figure, value, limit, how the limit was measured), as in bench/queue.py.
Row = tuple[str, float, float, str]


# --- Codemojex ----------------------------------------------------------------------------------------


async def fill(a: Arena, count: int) -> float:
    """``count`` guesses through codemojex.guesses.submit, every player at once, each player's guesses one
    after another (as a player submits): guesses admitted per second."""
    made = a.guesses(count)
    by_player: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for job, player, guess in made:
        by_player.setdefault(player, []).append((job, guess))
    game = Game.from_url(a.url, tag=a.tag, settings=SETTINGS)

    async def play(player: str, mine: list[tuple[str, tuple[str, ...]]]) -> None:
        for job, guess in mine:
            sub = await submit(game, a.round_id, player, guess, job_id=job)
            if sub.outcome is not Outcome.ADMITTED:
                raise RuntimeError(f"submit refused a bench guess: {sub}")

    async with game:
        start = time.perf_counter()
        await asyncio.gather(*(play(player, mine) for player, mine in by_player.items()))
        return count / (time.perf_counter() - start)


def _worker(a: Arena, concurrency: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "codemojex.cli", "--redis-url", a.url, "--tag", a.tag]
    argv += ["--log-level", "WARNING", "worker", "--concurrency", str(concurrency)]
    argv += ["--lease-ms", str(LEASE_MS)]
    with log.open("ab") as err:
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)


def _check_alive(procs: list[subprocess.Popen[bytes]], log: Path) -> None:
    for proc in procs:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"codemojex worker exited with {proc.returncode}: {tail}")


def scored(a: Arena, count: int, processes: int, concurrency: int, logs: Path) -> tuple[float, float]:
    """Start ``processes`` score workers on the round's ``count`` waiting guesses and wait until all are
    scored (the round's ``scored`` zset). Guesses scored per second, first claim to last finish on the
    server clock (the jobs' rows), so process start-up is not counted; and the wall time from starting
    the processes, for the record."""
    client = redis.Redis.from_url(a.url)
    log = logs / f"worker-{a.tag}.log"
    started = time.perf_counter()
    procs = [_worker(a, concurrency, log) for _ in range(processes)]
    try:
        deadline = time.monotonic() + 300
        while client.zcard(a.keys.scored(a.round_id)) < count:
            _check_alive(procs, log)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} guesses were not scored in 300 s")
            time.sleep(0.02)
        wall = time.perf_counter() - started
    finally:
        stop(procs)
    first, last = claim_span_ms(client, a.bus_keys)
    client.close()
    return count / max(0.001, (last - first) / 1000), wall


async def _scored_event(game: Game, a: Arena, after: bytes, guess_id: str | None) -> bytes:
    """Block on the round's event stream past ``after`` until the scored event of ``guess_id`` (any, if
    None) arrives; the id of that event."""
    stream = a.keys.events(a.round_id)
    wanted = None if guess_id is None else guess_id.encode()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        # BLOCK under the client's 5 s socket timeout (redis-py 8's default)
        reply = await game.redis.xread({stream: after}, count=100, block=1000)
        for _, entries in reply or ():
            for entry_id, fields in entries:
                after = entry_id
                if fields.get(b"kind") == b"scored" and wanted in (None, fields.get(b"guess")):
                    return after
    raise RuntimeError(f"no scored event for {guess_id} in 60 s")


async def latency(a: Arena, samples: int, concurrency: int, logs: Path) -> tuple[float, float]:
    """One score worker, idle; submit one guess at a time and time from the call of submit to its scored
    event on the round's stream (XREAD BLOCK), in ms (p50, p99)."""
    log = logs / f"worker-{a.tag}.log"
    proc = _worker(a, concurrency, log)
    game = Game.from_url(a.url, tag=a.tag, settings=SETTINGS)
    times = []
    try:
        async with game:
            made = a.guesses(samples + 1)
            job, player, guess = made[0]  # the warm-up: waits for the process to start
            after = b"0-0"
            await submit(game, a.round_id, player, guess, job_id=job)
            after = await _scored_event(game, a, after, guess_of(job))
            for job, player, guess in made[1:]:
                await asyncio.sleep(0.02)  # let the worker go idle and block on the wake list again
                t0 = time.perf_counter_ns()
                sub = await submit(game, a.round_id, player, guess, job_id=job)
                if sub.outcome is not Outcome.ADMITTED:
                    raise RuntimeError(f"submit refused a bench guess: {sub}")
                after = await _scored_event(game, a, after, guess_of(job))
                times.append((time.perf_counter_ns() - t0) / 1e6)
            _check_alive([proc], log)
    finally:
        stop([proc])
    return percentile(times, 50), percentile(times, 99)


# --- the game section -----------------------------------------------------------------------------


@dataclass
class Figures:
    rows: list[Row]
    info: dict[str, Any]


def _warnings(logs: Path) -> dict[str, int]:
    """Warning and error records in each worker log (e.g. jobs retried on a Redis error): a figure
    measured with retries in it is not the one it claims to be."""
    counts = {}
    for log in sorted(logs.glob("worker-*.log")):
        text = log.read_text(errors="replace")
        counts[log.stem] = text.count("level=warning") + text.count("level=error")
    return counts


def measure(url: str, *, guesses: int, samples: int, players: int, concurrency: int) -> Figures:
    """Every game figure on the server at ``url``, each phase on a bus tag of its own."""
    n = guesses
    started = time.perf_counter()
    client = redis.Redis.from_url(url)
    rewrites = int(client.info("persistence")["aof_rewrites"])
    logs = Path(tempfile.mkdtemp(prefix="bench-game-"))
    limit = arena(url, "game-limit", players, n)
    lim_submit, admitted = limit_submit(client, limit, n)
    lim_score = limit_score(client, limit, admitted)
    serial = arena(url, "game-serial", players, samples)
    lim50, lim99 = limit_latency(client, serial, samples)
    one, two = arena(url, "game-1", players, n), arena(url, "game-2", players, n)
    submit1 = asyncio.run(fill(one, n))
    scored1, wall1 = scored(one, n, 1, concurrency, logs)
    submit2 = asyncio.run(fill(two, n))
    scored2, wall2 = scored(two, n, 2, concurrency, logs)
    submitted = 2 * n / (n / submit1 + n / submit2)  # both fills together
    lat = arena(url, "game-latency", players, samples + 1)
    lat50, lat99 = asyncio.run(latency(lat, samples, concurrency, logs))
    rewrites = int(client.info("persistence")["aof_rewrites"]) - rewrites
    client.close()
    warnings = _warnings(logs)
    if not any(warnings.values()):
        shutil.rmtree(logs, ignore_errors=True)
    rows: list[Row] = [
        (f"submit, {players} players at once (guesses/s)", submitted, lim_submit, "raw pipelined submit.lua"),
        ("scored, 1 worker process (guesses/s)", scored1, lim_score, "raw claim.lua + score.lua"),
        ("scored, 2 worker processes (guesses/s)", scored2, lim_score, "raw claim.lua + score.lua"),
        ("submit → scored at idle, p50 (ms)", lat50, lim50, "raw submit + claim + score.lua, serial, p50"),
        ("submit → scored at idle, p99 (ms)", lat99, lim99, "raw submit + claim + score.lua, serial, p99"),
    ]
    info = {
        "guesses": n,
        "latency_samples": samples,
        "players": players,
        "worker_concurrency": concurrency,
        "submit_fills_guesses_per_s": [submit1, submit2],
        "scored_wall_s_from_process_start": [wall1, wall2],
        "aof_rewrites": rewrites,
        "worker_log_warnings": warnings,
        "worker_logs": str(logs) if any(warnings.values()) else None,
        "seconds": time.perf_counter() - started,
    }
    return Figures(rows, info)


def print_table(figures: Figures) -> None:
    """The game section, in the queue table's form."""
    info = figures.info
    print(
        f"\nCodemojex game loop · {info['guesses']} guesses · {info['players']} players · "
        f"workers at --concurrency {info['worker_concurrency']}\n"
    )
    print("| figure | Codemojex | Redis limit | ratio | limit measured as |")
    print("|---|---:|---:|---:|---|")
    for name, value, limit, how in figures.rows:
        print(f"| {name} | {value:,.2f} | {limit:,.2f} | {value / limit:.2f} | {how} |")
    print(f"\n(game part: {info['seconds']:.0f} s, {info['aof_rewrites']} AOF rewrites during it)")
    if info["worker_logs"]:
        counts = ", ".join(f"{name}: {count}" for name, count in info["worker_log_warnings"].items() if count)
        print(f"(worker warnings, e.g. retried jobs: {counts}; the logs are in {info['worker_logs']})")


def to_json(figures: Figures) -> dict[str, Any]:
    rows = [{"figure": r[0], "value": r[1], "limit": r[2], "limit_as": r[3]} for r in figures.rows]
    return {**figures.info, "rows": rows}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The game's sizes, on the queue benchmark's command line too."""
    parser.add_argument("--game-guesses", type=int, default=20_000, help="guesses per throughput phase")
    parser.add_argument("--game-samples", type=int, default=500, help="submit -> scored latency samples")
    parser.add_argument("--game-players", type=int, default=100)
    parser.add_argument("--game-concurrency", type=int, default=64, help="of each codemojex worker")


def from_arguments(args: argparse.Namespace) -> Figures:
    """The game figures on a redis-server of their own, configured as the queue benchmark's (AOF on,
    appendfsync everysec), so what the queue phases left behind (their rows, their AOF) plays no part."""
    with RedisProcess(appendonly=True, appendfsync="everysec") as server:
        return measure(
            server.url,
            guesses=args.game_guesses,
            samples=args.game_samples,
            players=args.game_players,
            concurrency=args.game_concurrency,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    print_table(from_arguments(parser.parse_args()))
    print("(nothing saved: make bench writes the game figures into bench/results/queue-latest.json)")


if __name__ == "__main__":
    main()
