"""The cluster benchmark: one queue and one game over P partitions of a real three-master Redis Cluster,
P = 1 against P = 3 (:mod:`echomq.partitions`, :mod:`codemojex.spread`).

Every node of the local cluster shares this machine's cores, so here the cluster cannot go faster than
one server: what this part shows is what spreading costs (P = 3 against P = 1 on the same cluster: the
claim rotating across partitions, a connection per node, a block on every partition's wake list) and
the per-partition rates that README's throughput model ("Scaling out") is checked against.

- **drain**: ``count`` jobs over 100 lanes pre-filled on a partitioned bus of P partitions, drained by
  one ``echomq --cluster --partitions P worker bench.handlers:noop`` process (concurrency 200), from the
  first claim to the last finish on the rows' server times (the nodes share this machine's clock); with
  P = 3, each partition's own jobs over its own span too. The reference: the raw pipelined claim +
  complete loop (:func:`bench.queue.limit_drain`) against one node of the same cluster.
- **submit → scored**: a spread game of P partitions and one score-worker process (``python -m
  bench.cluster worker``); guesses sent open loop at ``rate`` a second for ``seconds`` (guess *i* at
  *start + i / rate*, whatever the replies) by 1,000 players; p50 and p99 of scored less admitted, from
  every GES record (server clock).

Run alone: ``.venv/bin/python -m bench.cluster`` (``--quick`` for small sizes). Figures are figures,
never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import time

import redis

from bench.processes import stop
from bench.queue import LANES, PIPELINE, ROOT, claim_span_ms, enqueue_batched, limit_drain, new_jobs
from bench.report import Figure, Part, percentile, table
from codemojex import spread
from codemojex.spread import SpreadGame
from codemojex.spread_jobs import SpreadScoreWorker
from echomq import Bus, Worker
from echomq.keyspace import Keyspace
from echomq.partitions import PartitionedBus, partition_tags
from echomq.testing.cluster import RedisClusterProcesses
from echomq.testing.reshard import slot_of, slot_owner

KEYBOARD = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑", "🍍", "🥥")
PLAYERS = 1000
TARGET_SPREAD = 0.8  # ours: P = 3 drains at >= 0.8 of P = 1 on the same machine (the rotation's cost)


def _node_client(nodes: RedisClusterProcesses, key: str) -> redis.Redis:
    """A plain client to the master serving ``key``'s slot."""
    return redis.Redis(port=slot_owner(nodes, slot_of(key)))


def _worker(url: str, tag: str, partitions: int, *args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, REDIS_URL=url, PYTHONPATH=str(ROOT))
    argv = [sys.executable, *args]
    argv += ["--tag", tag, "--partitions", str(partitions)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def drain(nodes: RedisClusterProcesses, tag: str, partitions: int, count: int) -> tuple[float, list[float]]:
    """Drain ``count`` jobs of a ``partitions``-partition bus by one worker process: jobs/s in all, and
    each partition's own jobs/s over its own span."""
    url = f"redis://127.0.0.1:{nodes.ports[0]}/0"

    async def fill() -> None:
        async with PartitionedBus.from_url(url, tag=tag, partitions=partitions, cluster=True) as pbus:
            jobs = new_jobs(count, LANES)
            for i in range(0, count, PIPELINE):
                await pbus.enqueue_many(jobs[i : i + PIPELINE])

    asyncio.run(fill())
    spaces = [Keyspace(t) for t in partition_tags(tag, partitions)]
    clients = [_node_client(nodes, keys.ring) for keys in spaces]
    cli = ("-m", "echomq.cli", "--cluster", "worker", "bench.handlers:noop", "--concurrency", "200")
    proc = _worker(url, tag, partitions, *cli)
    try:
        deadline = time.monotonic() + 300
        while (
            sum(int(c.hget(k.stats, "completed") or 0) for c, k in zip(clients, spaces, strict=True)) < count
        ):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the partitioned drain did not finish")
            time.sleep(0.05)
    finally:
        stop([proc])
    spans = [claim_span_ms(c, keys) for c, keys in zip(clients, spaces, strict=True)]
    own = [int(c.zcard(keys.done)) for c, keys in zip(clients, spaces, strict=True)]
    for client in clients:
        client.close()
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    rates = [n / max(0.001, (e - s) / 1000) for n, (s, e) in zip(own, spans, strict=True)]
    return count / max(0.001, (last - first) / 1000), rates


def limit(nodes: RedisClusterProcesses, tag: str, count: int) -> float:
    """The raw claim + complete loop against the one node that serves ``tag``."""
    url = f"redis://127.0.0.1:{slot_owner(nodes, slot_of(Keyspace(tag).ring))}/0"
    asyncio.run(enqueue_batched(url, tag, count))
    bus = Bus.from_url(url, tag=tag)  # its keys and the claim's arguments; its client unused
    try:
        with redis.Redis.from_url(url) as client:
            return limit_drain(client, bus, count)
    finally:
        asyncio.run(bus.aclose())


async def _latencies(url: str, tag: str, partitions: int, rate: float, seconds: float) -> list[float]:
    """Open-loop guesses on a spread game, scored by one worker process: scored - admitted, in ms."""
    async with SpreadGame.from_url(url, tag=tag, partitions=partitions, cluster=True) as game:
        the_round = await spread.open_round(game, keyboard=list(KEYBOARD))
        people = [await spread.register(game, f"Bench {i}") for i in range(PLAYERS)]
        proc = _worker(url, tag, partitions, "-m", "bench.cluster", "worker")
        try:
            # Warm up: a guess of a player of each partition, scored, before the clock starts.
            firsts = {game.partition_of_player(p.id): p.id for p in reversed(people)}
            warm = [await spread.submit(game, the_round.id, p, "🍎🍎🍎🍎🍎🍎") for p in firsts.values()]
            deadline = time.monotonic() + 60
            while len(await spread.scored_records(game, the_round.id)) < len(warm):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the spread game's worker did not start")
                await asyncio.sleep(0.05)
            rng, total, sent = random.Random(7), int(rate * seconds), []
            start = time.perf_counter()
            for i in range(total):
                await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
                guess = "".join(rng.choice(KEYBOARD) for _ in range(6))
                player = people[i % PLAYERS].id
                sent.append(asyncio.create_task(spread.submit(game, the_round.id, player, guess)))
            admitted = {s.job for s in await asyncio.gather(*sent) if s.outcome.value == "admitted"}
            deadline = time.monotonic() + 120
            while len(records := await spread.scored_records(game, the_round.id)) < len(admitted) + len(warm):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the spread game did not score every guess")
                await asyncio.sleep(0.2)
        finally:
            stop([proc])
        warmed = {s.job for s in warm}
        return [float(r.scored_ms - r.submitted_ms) for r in records if r.job not in warmed]


def measure(count: int, rate: float, seconds: float, repeat: int) -> Part:
    with RedisClusterProcesses(3) as nodes:
        url = f"redis://127.0.0.1:{nodes.ports[0]}/0"
        run = time.monotonic_ns() % 10**8
        limits, ones, threes, parts = [], [], [], []
        for i in range(repeat):
            limits.append(limit(nodes, f"cl{run}-raw-{i}", count))
            ones.append(drain(nodes, f"cl{run}-one-{i}", 1, count)[0])
            total, rates = drain(nodes, f"cl{run}-three-{i}", 3, count)
            threes.append(total)
            parts.append(rates)
        lat1 = asyncio.run(_latencies(url, f"cg{run}-one", 1, rate, seconds))
        lat3 = asyncio.run(_latencies(url, f"cg{run}-three", 3, rate, seconds))
    raw, one, three = (statistics.median(x) for x in (limits, ones, threes))
    raw_as = "raw claim.lua by 500 + complete.lua, pipelined, on one node"
    figures = [
        Figure("cluster: drain, P = 1, 1 worker process", one, "jobs/s", raw, raw_as),
        Figure(
            "cluster: drain, P = 3, 1 worker process", three, "jobs/s", one, "P = 1", target=TARGET_SPREAD
        ),
    ]
    for p in range(3):
        own = statistics.median(r[p] for r in parts)
        figures.append(Figure(f"cluster: drain, P = 3, partition {p}'s own rate", own, "jobs/s", raw, raw_as))
    offered = f"{rate:g} guesses/s offered"
    for q in (50, 99):
        p1, p3 = percentile(lat1, q), percentile(lat3, q)
        figures.append(Figure(f"cluster: submit → scored, P = 1, {offered}, p{q}", p1, "ms", None, ""))
        figures.append(
            Figure(f"cluster: submit → scored, P = 3, {offered}, p{q}", p3, "ms", p1, "P = 1", better="lower")
        )
    info = {"jobs": count, "rate": rate, "seconds": seconds, "repeat": repeat, "masters": 3}
    return Part(figures, info=info)


def add_arguments(parser: argparse.ArgumentParser, *, quick: bool) -> None:
    parser.add_argument("--cluster-jobs", type=int, default=3000 if quick else 30_000)
    parser.add_argument("--cluster-rate", type=float, default=200.0 if quick else 500.0)
    parser.add_argument("--cluster-seconds", type=float, default=3.0 if quick else 10.0)
    parser.add_argument("--cluster-repeat", type=int, default=1 if quick else 3, help="runs per figure")


def bench_part(args: argparse.Namespace) -> Part:
    return measure(args.cluster_jobs, args.cluster_rate, args.cluster_seconds, args.cluster_repeat)


async def _serve(tag: str, partitions: int) -> None:
    """The score worker of a spread game (``python -m bench.cluster worker``), until SIGTERM."""
    async with SpreadGame.from_url(
        os.environ["REDIS_URL"], tag=tag, partitions=partitions, cluster=True, max_connections=200
    ) as game:
        worker = Worker(game.pbus, SpreadScoreWorker(game).handle, concurrency=50)
        await worker.run(handle_signals=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", nargs="?", choices=["worker"], help="(internal) the score worker")
    parser.add_argument("--tag", default="cg")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    known, _ = parser.parse_known_args()
    if known.command == "worker":
        asyncio.run(_serve(known.tag, known.partitions))
        return
    add_arguments(parser, quick=known.quick)
    args = parser.parse_args()
    part = bench_part(args)
    print(f"\nEchoMQ on a 3-master cluster · {os.cpu_count()} cores\n")
    print(table(part.figures))


if __name__ == "__main__":
    main()
