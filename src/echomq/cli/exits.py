"""How an ``echomq`` command ends: the exit codes, and :func:`explain`, which turns an error that ends a
command into its exit code and one line for stderr (naming the server, without its password)."""

from __future__ import annotations

import redis.exceptions

from echomq.cli.env import redis_url, shown_url
from echomq.errors import EchoMQError, InvalidInput, UnknownJob

EXIT_FAILURE = 1  # a job not found, not dead, or Redis unreachable
EXIT_USAGE = 2  # ill-formed input, as argparse uses


class UsageError(Exception):
    """Bad command-line input: reported on one line, exit code 2."""


def explain(exc: Exception) -> tuple[int, str]:
    """The exit code and the one-line message for an error that ends a command."""
    if isinstance(exc, UnknownJob):
        return EXIT_FAILURE, f"echomq: {exc}"
    if isinstance(exc, UsageError | InvalidInput):
        return EXIT_USAGE, f"echomq: error: {exc}"
    if isinstance(exc, EchoMQError):
        return EXIT_FAILURE, f"echomq: {type(exc).__name__}: {exc} (server {shown_url(redis_url())})"
    unreachable = (  # a cluster client that reached no node raises a RedisClusterException
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.RedisClusterException,
    )
    if isinstance(exc, unreachable):
        return EXIT_FAILURE, f"echomq: RedisUnavailable: {exc} (server {shown_url(redis_url())})"
    if isinstance(exc, redis.exceptions.RedisError):  # a call the bus does not translate (dead_jobs)
        return EXIT_FAILURE, f"echomq: {type(exc).__name__}: {exc} (server {shown_url(redis_url())})"
    return EXIT_USAGE, f"echomq: error: {exc}"  # a ValueError: e.g. a REDIS_URL redis-py cannot parse
