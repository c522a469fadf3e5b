"""The ``echomq`` command: run a worker, read stats, inspect jobs, handle dead letters, sweep, demo.

``--redis-url`` (else ``REDIS_URL``) selects the server (default ``redis://127.0.0.1:6379/0``;
``echomq demo`` starts an embedded Redis instead when neither is given); with ``--cluster`` it names
one node of a Redis Cluster, from which the client discovers the others. ``--tag`` selects the bus
(default ``cm``). Bad input (an ill-formed job id, a bad ``MODULE:FUNC``) exits with 2 and one line on
stderr; a job that does not exist, or a server that cannot be reached, exits with 1.
No error ends in a traceback.

This package: :func:`main` (here, the ``echomq`` console script and ``python -m echomq.cli``) parses with
:mod:`~.parser`, runs the sub-command's coroutine from :mod:`~.commands` (which prints what :mod:`~.render`
makes), and turns an error into its line and exit code with :mod:`~.exits`; :mod:`~.env` reads
``REDIS_URL``. The demo (:mod:`~.demo`) starts a redis-server through :mod:`echomq.testing`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import redis.exceptions

from echomq.cli import env
from echomq.cli.exits import UsageError, explain
from echomq.cli.parser import build_parser
from echomq.errors import EchoMQError
from echomq.worker import logs

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``echomq``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    env.use(args.redis_url)
    logs.configure(args.log_level)
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
    except (
        UsageError,
        EchoMQError,
        ValueError,
        redis.exceptions.RedisError,
        redis.exceptions.RedisClusterException,
    ) as exc:
        code, message = explain(exc)
        print(message, file=sys.stderr)
        return code
