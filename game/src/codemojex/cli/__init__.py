"""The ``codemojex`` command: open and close rounds, register players, guess, lock, read the board and the
wallet, run the score worker, and ``serve`` the web host with a worker and an embedded Redis (``make
run``).

``--redis-url`` (else ``REDIS_URL``, else ``redis://127.0.0.1:6379/0``) selects the server and ``--tag``
the bus (default ``cm``), as for ``echomq``. ``--json`` makes every command print one JSON document on
stdout instead of the readable form; the global options may also follow the command.

Exit codes, as ``echomq``'s: 0 done; 1 a thing not found, a refusal (a refused guess, a lock on an
unproven position, a closed round, a guess not scored within ``--wait``) or Redis unreachable; 2 bad
input (an ill-formed id, a bad option, a bad keyboard). An error is one line on stderr,
``codemojex: error: CODE: message``, with nothing on stdout; a refusal is an outcome, printed on stdout
(in JSON too) like any other. No error ends in a traceback.

This package: :func:`main` (here) parses with :mod:`~.parser` (its argument types: :mod:`~.arguments`),
runs the command's coroutine from :mod:`~.commands` or :mod:`~.play`, prints what :mod:`~.render` made of
it, and turns an error into its line and exit code with :mod:`~.exits`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from codemojex.cli.arguments import bus_settings
from codemojex.cli.commands import Command, Result
from codemojex.cli.exits import EXIT_INTERRUPTED, UsageError, explain
from codemojex.cli.parser import build_parser
from codemojex.cli.spread_commands import SPREAD
from codemojex.errors import CodemojexError
from codemojex.game import Game
from codemojex.spread import SpreadGame
from echomq.cli.env import redis_url as env_redis_url
from echomq.errors import EchoMQError
from echomq.worker import logs

__all__ = ["explain", "main"]


def _url(args: argparse.Namespace) -> str:
    url: str | None = args.redis_url
    return url or env_redis_url()


def _pool_size(args: argparse.Namespace) -> int | None:
    """A worker's handlers each hold a connection, beside its claims and completions: size the pool for
    them (redis-py's default of 100 fails calls past it instead of waiting)."""
    concurrency = getattr(args, "concurrency", None)
    return None if concurrency is None else 2 * int(concurrency) + 16


def _serve(args: argparse.Namespace) -> int:
    from codemojex.schedule import RoundSettings  # noqa: PLC0415
    from codemojex.serve import ServeOptions, serve  # noqa: PLC0415  (only serve needs the web stack)
    from codemojex.web.admission_limits import Limits  # noqa: PLC0415
    from codemojex.web.buckets import Rate  # noqa: PLC0415

    limits = Limits(
        signup_per_address=Rate(args.signups_per_hour, 3_600_000 // args.signups_per_hour),
        inflight_per_address=args.inflight_per_address,
        inflight_total=args.inflight,
        streams_per_player=args.streams_per_player,
        streams_per_address=args.streams_per_address,
        streams_total=args.streams,
        body_timeout_s=float(args.body_timeout),
        trusted_proxies=tuple(args.trusted_proxy),
    )
    options = ServeOptions(
        host=args.host,
        port=args.port,
        data_dir=Path(args.data_dir),
        tag=args.tag,
        proof=args.proof,
        proof_crash=args.proof_crash,
        concurrency=args.concurrency,
        operator_token=args.operator_token,
        redis_url=args.redis_url,
        limits=limits,
        limit_concurrency=args.limit_concurrency,
        keep_alive_s=args.keep_alive,
        hosts=args.hosts,
        partitions=args.partitions,
        rounds=RoundSettings(
            on=args.schedule,
            duration_s=args.round_duration,
            gap_s=args.round_gap,
            retention_s=args.retention,
        ),
    )
    return asyncio.run(serve(options))


def _redis_url(args: argparse.Namespace) -> int:
    """``codemojex redis-url``: the URL of serve's embedded Redis as the operator (or admin) user, with
    its password from the data folder (0600). Meant for ``export REDIS_URL="$(codemojex redis-url)"``,
    which keeps the password out of the shell's history; it is printed to the caller's own terminal."""
    from codemojex.embedded import cli_url  # noqa: PLC0415

    url = cli_url(Path(args.data_dir), args.tag, args.role)
    if args.json:
        _print_json({"redis_url": url, "role": args.role})
    else:
        print(url)
    return 0


def _conformance(args: argparse.Namespace) -> int:
    from codemojex.conformance.harness import run, write  # noqa: PLC0415
    from codemojex.conformance.schedule import Config  # noqa: PLC0415

    try:
        config = Config(
            guesses=args.guesses,
            players=args.players,
            workers=args.workers,
            concurrency=args.concurrency,
            appendfsync=args.appendfsync,
            seed=args.seed,
            kinds=tuple(kind.strip() for kind in args.kinds.split(",") if kind.strip()),
            fault_every_s=args.fault_every,
            boundary_rate=args.boundary_rate,
            lease_ms=args.lease_ms,
            max_attempts=args.max_attempts,
            socket_timeout_s=args.socket_timeout,
            sweep_every_s=args.sweep_every,
            fail_rate=args.fail_rate,
            backoff_base_ms=args.backoff_base_ms,
            result_ttl_ms=args.result_ttl_ms,
            dedup_window_ms=args.dedup_window_ms,
            quiet=args.quiet,
            flow=args.flow,
            flow_rate=args.flow_rate,
            tasks=args.tasks,
            redis_url=args.redis_url,
            # --cluster without --redis-url: the cluster schedule, on a 3-master cluster of the run's own.
            cluster=bool(args.cluster),
            # A tag of this run's own unless one is given: on a Redis of your own, a second run must not
            # meet the first one's keys (the effect counter is per tag).
            tag=args.tag if args.tag != "cm" else f"conformance-{int(time.time() * 1000)}",
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    report = run(config)
    if args.report:
        write(report, Path(args.report))
    if args.json:
        _print_json(report.as_dict())
    else:
        print(report.to_text())
    return 0 if report.ok else 1


async def _run(args: argparse.Namespace) -> Result:
    run: Command = args.run
    partitions = getattr(args, "partitions", 1) if run in SPREAD else 1
    try:
        if partitions > 1:
            spread = SpreadGame.from_url(
                _url(args),
                tag=args.tag,
                partitions=partitions,
                bus_settings=bus_settings(args),
                cluster=args.cluster,
                max_connections=_pool_size(args),
            )
        else:
            game = Game.from_url(
                _url(args),
                tag=args.tag,
                bus_settings=bus_settings(args),
                cluster=args.cluster,
                max_connections=_pool_size(args),
            )
    except (EchoMQError, CodemojexError):
        raise
    except ValueError as exc:  # redis-py cannot read the URL
        raise UsageError(f"bad Redis URL: {exc}") from None
    if partitions > 1:
        async with spread:
            await spread.check_layout()  # another P than the game's: refused before anything runs
            return await SPREAD[run](spread, args)
    async with game:
        return await run(game, args)


def _tolerant(stream: object) -> None:
    """Never fail on an emoji a terminal's encoding cannot show: escape it instead."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``codemojex``; returns the exit code."""
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    args = build_parser().parse_args(argv)
    handler = logs.configure(args.log_level)
    game_logger = logging.getLogger("codemojex")  # the score worker's own records, in the same form
    game_logger.addHandler(handler)
    game_logger.setLevel(args.log_level)
    try:
        if args.run is None:
            if args.command == "redis-url":
                return _redis_url(args)
            return _conformance(args) if args.command == "conformance" else _serve(args)
        result = asyncio.run(_run(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001  (the promise: no error ends in a traceback, a bug neither)
        code, message = explain(exc, _url(args))
        print(message, file=sys.stderr)
        return code
    if args.json:
        _print_json(result.data)
    else:
        for line in result.lines:
            print(line)
    return result.code
