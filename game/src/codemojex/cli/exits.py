"""How a ``codemojex`` command ends: the exit codes, and :func:`explain`, which turns any exception that
ends a command into its exit code and one line for stderr, ``codemojex: error: CODE: message``, so that
no error ends in a traceback.
"""

from __future__ import annotations

import redis.exceptions

from codemojex.errors import CodemojexError, InvalidInput, Unavailable
from echomq.cli.env import shown_url
from echomq.cli.exits import EXIT_FAILURE, EXIT_USAGE
from echomq.errors import InvalidInput as BusInvalidInput
from echomq.errors import RedisUnavailable

PROG = "codemojex"
EXIT_OK = 0
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad command-line input found after parsing (a REDIS_URL redis-py cannot read): exit code 2."""


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no message)"


def explain(exc: BaseException, url: str) -> tuple[int, str]:
    """The exit code and the one-line message for an error that ends a command."""
    unreachable = (
        Unavailable,
        RedisUnavailable,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.RedisClusterException,
    )
    if isinstance(exc, unreachable):
        return EXIT_FAILURE, f"{PROG}: error: unavailable: {_one_line(str(exc))} (server {shown_url(url)})"
    if isinstance(exc, UsageError):
        return EXIT_USAGE, f"{PROG}: error: {_one_line(str(exc))}"
    if isinstance(exc, CodemojexError):
        code = EXIT_USAGE if isinstance(exc, InvalidInput) else EXIT_FAILURE
        return code, f"{PROG}: error: {exc.code}: {_one_line(str(exc))}"
    if isinstance(exc, BusInvalidInput):
        return EXIT_USAGE, f"{PROG}: error: invalid_input: {_one_line(str(exc))}"
    return EXIT_FAILURE, f"{PROG}: error: {type(exc).__name__}: {_one_line(str(exc))}"
