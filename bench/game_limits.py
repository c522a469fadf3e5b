"""The game benchmark's Redis limit (:mod:`bench.game`): raw pipelined EVALSHA loops of the game's own
scripts on a blocking client, the scoring done before the clock starts."""

from __future__ import annotations

import time
from typing import Any

import redis

from bench.arena import Arena, score_call, submit_call
from bench.report import percentile
from codemojex.game import LIBRARY
from echomq import Bus, lanes
from echomq.scripts import SyncScripts

PIPELINE = 1000  # as the queue benchmark's
CLAIM_BATCH = 500  # as the queue benchmark's limit_drain
LEASE_MS = 30_000


# --- the Redis limit: raw pipelined EVALSHA loops ------------------------------------------------


def _check_admitted(replies: list[Any]) -> None:
    refused = [reply for reply in replies if int(reply[0]) != 1]
    if refused:
        raise RuntimeError(f"submit.lua refused {len(refused)} bench guesses, e.g. {refused[0]!r}")


def limit_submit(
    client: redis.Redis, a: Arena, count: int
) -> tuple[float, dict[str, tuple[str, tuple[str, ...]]]]:
    """submit.lua in pipelines of PIPELINE on one blocking client: guesses admitted per second; and the
    admitted guesses (job -> player, guess) for :func:`limit_score`."""
    scripts = SyncScripts(client, LIBRARY)
    made = a.guesses(count)
    calls = [submit_call(a, job, player, guess) for job, player, guess in made]
    start = time.perf_counter()
    for i in range(0, count, PIPELINE):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls[i : i + PIPELINE]:
            scripts.run("submit", keys, args, client=pipe)
        _check_admitted(pipe.execute())
    rate = count / (time.perf_counter() - start)
    return rate, {job: (player, guess) for job, player, guess in made}


def limit_score(client: redis.Redis, a: Arena, admitted: dict[str, tuple[str, tuple[str, ...]]]) -> float:
    """claim.lua (batch of CLAIM_BATCH) then score.lua for each, pipelined: guesses scored per second.

    The feedback is computed before the clock starts: this is what Redis can do, not the engine."""
    queue = SyncScripts(client)
    game = SyncScripts(client, LIBRARY)
    calls = {job: score_call(a, job, player, guess) for job, (player, guess) in admitted.items()}
    claim_keys, claim_args = lanes.claim_call(Bus.from_url(a.url, a.tag), CLAIM_BATCH, LEASE_MS, "")
    start = time.perf_counter()
    done = 0
    while done < len(calls):
        claimed = lanes.claimed_from_reply(queue.run("claim", claim_keys, claim_args), "")
        if not claimed.jobs:
            break
        pipe = client.pipeline(transaction=False)
        for claim in claimed.jobs:
            keys, args = calls[claim.job]
            game.run("score", keys, [args[0], claim.token, claim.request, *args[3:]], client=pipe)
        replies = pipe.execute()
        done += sum(1 for reply in replies if int(reply[0]) == 1)
    elapsed = time.perf_counter() - start
    if done != len(calls):
        raise RuntimeError(f"the score limit scored {done} of {len(calls)} guesses")
    return done / elapsed


def limit_latency(client: redis.Redis, a: Arena, samples: int) -> tuple[float, float]:
    """submit.lua, claim.lua (one) and score.lua, one round trip each, in ms (p50, p99): the floor under
    the submit -> scored latency (which also reads the round, wakes the worker and reads the event)."""
    queue = SyncScripts(client)
    game = SyncScripts(client, LIBRARY)
    claim_keys, claim_args = lanes.claim_call(Bus.from_url(a.url, a.tag), 1, LEASE_MS, "")
    made = a.guesses(samples)
    chains = [(submit_call(a, *m), score_call(a, *m)) for m in made]
    times = []
    for (submit_keys, submit_args), (score_keys, score_args) in chains:
        t0 = time.perf_counter_ns()
        _check_admitted([game.run("submit", submit_keys, submit_args)])
        (claim,) = lanes.claimed_from_reply(queue.run("claim", claim_keys, claim_args), "").jobs
        reply = game.run("score", score_keys, [score_args[0], claim.token, claim.request, *score_args[3:]])
        times.append((time.perf_counter_ns() - t0) / 1e6)
        if int(reply[0]) != 1:
            raise RuntimeError(f"score.lua answered {reply!r}")
    return percentile(times, 50), percentile(times, 99)
