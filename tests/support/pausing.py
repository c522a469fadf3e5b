"""A redis-server a test may stop (SIGSTOP) and continue (SIGCONT): a Redis pause longer than the client's
socket timeout, after which every command already sent still runs (a lost reply)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from echomq.testing.server import RedisProcess


@pytest.fixture(name="server")
def stoppable_server() -> Iterator[RedisProcess]:
    """A redis-server of this test's own (it is stopped and continued), always continued at the end."""
    process = RedisProcess(appendonly=False)
    process.start()
    try:
        yield process
    finally:
        signal_server(process, signal.SIGCONT)
        process.close()


def signal_server(server: RedisProcess, sig: signal.Signals) -> None:
    """Send ``sig`` to the server's process if it still runs."""
    assert server.process is not None
    if server.process.poll() is None:
        os.kill(server.process.pid, sig)


def after(seconds: float, action: Any, *args: Any) -> None:
    """Call ``action(*args)`` in ``seconds``, from a timer thread."""
    timer = threading.Timer(seconds, action, args)
    timer.daemon = True
    timer.start()


def pause(server: RedisProcess, seconds: float | None) -> None:
    """SIGSTOP the server now; SIGCONT it after ``seconds`` (None: the test continues it)."""
    signal_server(server, signal.SIGSTOP)
    if seconds is not None:
        after(seconds, signal_server, server, signal.SIGCONT)
