"""A redis-py connection closed under a call (its asyncio cluster client resets a node's connections
when the slot map changes) fails with AttributeError from inside redis-py; EchoMQ and the game read it
as Redis out of reach (the call's effect unknown, retry-safe), and leave every other AttributeError be."""

from __future__ import annotations

from typing import Any

import pytest

from codemojex.errors import Unavailable
from codemojex.game import translate_errors
from echomq import RedisUnavailable
from echomq.errors import translate_redis_errors

SEND = "def send(writer):\n    writer.writelines([b'*1\\r\\n$4\\r\\nPING\\r\\n'])\n"


def _attribute_error_in(filename: str) -> AttributeError:
    """The AttributeError of writing on a connection whose writer is gone, raised by code in ``filename``."""
    namespace: dict[str, Any] = {}
    exec(compile(SEND, filename, "exec"), namespace)  # a frame in that file, for the test
    try:
        namespace["send"](None)
    except AttributeError as exc:
        return exc
    raise AssertionError("writing on None did not fail")


REDIS_CONNECTION = "/venv/lib/python3.11/site-packages/redis/asyncio/connection.py"


def test_a_connection_closed_under_the_call_is_redis_unavailable():
    with pytest.raises(RedisUnavailable, match="writelines"), translate_redis_errors():
        raise _attribute_error_in(REDIS_CONNECTION)


def test_the_game_reads_it_as_unavailable():
    with pytest.raises(Unavailable, match="writelines"), translate_errors():
        raise _attribute_error_in(REDIS_CONNECTION)


@pytest.mark.parametrize("translate", [translate_redis_errors, translate_errors])
def test_an_attribute_error_of_other_code_is_a_bug_and_stays_one(translate):
    with pytest.raises(AttributeError), translate():
        raise _attribute_error_in("/srv/app/handler.py")
