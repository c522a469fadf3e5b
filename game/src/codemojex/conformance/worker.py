"""The harness's worker process: ``python -m codemojex.conformance.worker``.

It is ``codemojex worker`` (:func:`codemojex.cli.commands.run_score_worker`: an :class:`echomq.Worker`
draining the lanes with :class:`~codemojex.score_worker.ScoreWorker`, and the refunder of dead guesses),
the same code in a real process, with what the checks need around the handler and nothing changed
inside it:

* the run's bus :class:`~echomq.Settings` (result TTL, dedup window, retry backoff), and whatever the
  Redis URL carries (the harness gives it a short ``socket_timeout``, so a Redis pause outlasts it);
* every handler start is appended to a file of its own, ``starts-<pid>.log`` in ``--starts``
  (see :mod:`.starts`): one ``write(2)`` on an ``O_APPEND`` descriptor before the handler runs, so the
  line is in the kernel even if the process is SIGKILLed the next instant;
* with ``--fail-rate``, that share of first deliveries fails with a transient error before any effect
  (the handler failure path: the job retries after the bus's backoff, through ``delayed``);
* the punctuality phase's probe jobs (lanes :data:`.starts.PROBE_LANE` ...) are recorded and held as
  their payload says, then completed; they are never scored.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import logging
import random
from collections.abc import Callable

from codemojex.cli.commands import run_score_worker
from codemojex.conformance import flow
from codemojex.conformance.starts import StartLog, is_probe
from codemojex.game import Game
from echomq import Job, Settings
from echomq.worker import logs
from echomq.worker.handler import Handler, HandlerResult


class TransientFailure(Exception):
    """The failure ``--fail-rate`` injects: retryable, raised before the handler touches anything."""


def _wrapper(
    starts: StartLog, fail_rate: float, rng: random.Random, *, tasks: bool = False
) -> Callable[[Handler], Handler]:
    def wrap(score: Handler) -> Handler:
        async def handle(job: Job) -> HandlerResult:
            starts.record(job)
            if is_probe(job.lane):
                return await _probe(job)
            if tasks and flow.is_task(job.payload):  # a named task beside the guesses (--tasks)
                return await flow.TASKS.handler(job)
            if job.attempt == 1 and fail_rate > 0 and rng.random() < fail_rate:
                raise TransientFailure("conformance: a transient failure of a first delivery")
            result = score(job)
            return await result if inspect.isawaitable(result) else result

        return handle

    return wrap


async def _probe(job: Job) -> bytes:
    """A probe holds its slot ``hold_ms`` on its first delivery (``rerun_ms`` on the next ones), and fails
    its first delivery if it says so (a retry with backoff)."""
    spec = json.loads(job.payload)
    if job.attempt == 1 and spec.get("fail_first"):
        raise TransientFailure("conformance: a probe's first delivery fails")
    hold = spec.get("hold_ms", 0) if job.attempt == 1 else spec.get("rerun_ms", 0)
    if hold:
        await asyncio.sleep(hold / 1000)
    return b""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m codemojex.conformance.worker", description=__doc__)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--cluster", action="store_true", help="a Redis Cluster (the URL names one node)")
    parser.add_argument("--starts", required=True, metavar="DIR", help="where starts-<pid>.log goes")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--lease-ms", type=int, default=1000)
    parser.add_argument("--sweep-every", type=float, default=0.3, metavar="SECONDS")
    parser.add_argument("--grace", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument("--fail-rate", type=float, default=0.0, metavar="P")
    parser.add_argument("--result-ttl-ms", type=int, default=None)
    parser.add_argument("--dedup-window-ms", type=int, default=None)
    parser.add_argument("--backoff-base-ms", type=int, default=None)
    parser.add_argument("--seed", type=float, default=0.0)
    parser.add_argument("--tasks", action="store_true", help="also serve the named tasks of a --flow run")
    parser.add_argument("--log-level", default="ERROR")
    return parser.parse_args(argv)


def bus_settings(args: argparse.Namespace) -> Settings:
    """The bus Settings the run gives (the library's defaults for what it leaves unset)."""
    given = {
        name: value
        for name, value in (
            ("result_ttl_ms", args.result_ttl_ms),
            ("dedup_window_ms", args.dedup_window_ms),
            ("backoff_base_ms", args.backoff_base_ms),
        )
        if value is not None
    }
    return Settings(**given)


async def run(args: argparse.Namespace) -> None:
    pool = 2 * args.concurrency + 16  # as codemojex worker: a handler holds a connection beside the loop's
    game = Game.from_url(
        args.redis_url, args.tag, bus_settings=bus_settings(args), cluster=args.cluster, max_connections=pool
    )
    with StartLog(args.starts, args.lease_ms) as starts:
        async with game:
            starts.ready()
            await run_score_worker(
                game,
                concurrency=args.concurrency,
                lease_ms=args.lease_ms,
                sweep_every_s=args.sweep_every,
                grace_s=args.grace,
                wrap=_wrapper(starts, args.fail_rate, random.Random(args.seed), tasks=args.tasks),
            )


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    handler = logs.configure(args.log_level)
    logging.getLogger("codemojex").addHandler(handler)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
