"""The worker stack's entry points on bad days: the CLI without Redis, the demo interrupted or failing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from echomq.cli import demo
from echomq.errors import EchoMQError
from echomq.keyspace import Keyspace
from echomq.testing.server import find_redis_server, free_port
from tests.support.workers import ROOT, eventually, run_cli


@pytest.mark.parametrize("args", [("dead", "list"), ("dead", "retry", "--all")], ids=" ".join)
def test_dead_commands_without_redis_exit_1_without_a_traceback(args):
    """dead list / dead retry --all with Redis unreachable exit 1 with one line, not a traceback."""
    out = run_cli(f"redis://127.0.0.1:{free_port()}/0", *args)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("echomq: RedisUnavailable")
    assert out.stdout == ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too
        return stat.read().split(")")[-1].split()[0] != "Z"


async def test_demo_interrupted_while_its_server_starts_stops_that_server(tmp_path):
    """Ctrl-C while the demo's embedded redis-server starts: the demo exits and that server is stopped."""
    pidfile = tmp_path / "server.pid"
    slow = tmp_path / "slow-redis-server"
    slow.write_text(f'#!/bin/sh\necho $$ > "{pidfile}"\nsleep 2\nexec "{find_redis_server()}" "$@"\n')
    slow.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(REDIS_SERVER=str(slow), PYTHONPATH=str(ROOT))
    demo = subprocess.Popen(
        [sys.executable, "-m", "echomq.cli", "demo", "--seconds", "60"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid = None
    try:
        await eventually(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 30, "server started")
        pid = int(pidfile.read_text())
        demo.send_signal(signal.SIGINT)  # while the server is still starting
        demo.communicate(timeout=30)
        await eventually(lambda: not _alive(pid), 15, "the embedded server stopped")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate(timeout=10)
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
    assert demo.returncode in (0, 130)


async def test_demo_that_fails_stops_its_worker_before_it_returns(redis_server, tag, sync_redis, monkeypatch):
    """A demo ended by an error (here a foreign key where the ring should be) stops its worker first."""
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    sync_redis.set(Keyspace(tag).ring, "not a list")  # the producer and the live line both fail on it
    with pytest.raises(EchoMQError):
        await asyncio.wait_for(demo.run(tag=tag, seconds=30, lanes=2, rate=20), 30)
    left = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in left:
        task.cancel()
    assert left == []


@pytest.mark.parametrize("seconds", ["nan", "inf", "-1"])
def test_demo_with_a_bad_duration_exits_2_and_changes_nothing(redis_server, tag, sync_redis, seconds):
    """demo --seconds nan (or inf, or negative) is bad input: exit 2, one line, no key written."""
    out = run_cli(redis_server.url, "--tag", tag, "demo", "--seconds", seconds, timeout=15)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().startswith("echomq: error: ")
    assert "Traceback" not in out.stderr
    assert list(sync_redis.scan_iter(match=Keyspace(tag).pattern)) == []
