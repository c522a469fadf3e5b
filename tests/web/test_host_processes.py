"""``python -m codemojex.web --hosts N``: N host processes share one port (uvicorn's workers), each
answers, and SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import psutil

from echomq.testing.server import free_port


def _hosts(parent: psutil.Process) -> list[psutil.Process]:
    """The parent's worker processes (multiprocessing's spawned children that serve the app)."""
    return [
        child
        for child in parent.children()
        if any("spawn_main" in part or "multiprocessing" in part for part in child.cmdline())
        and "resource_tracker" not in " ".join(child.cmdline())
    ]


def test_two_host_processes_share_the_port_answer_and_stop(redis_server, tag, tmp_path):
    """--hosts 2 runs two processes on one port; both serve requests (each holds its own Redis
    connection once it has answered); SIGTERM ends the parent and both, with exit code 0."""
    port = free_port()
    argv = [sys.executable, "-m", "codemojex.web", "--redis-url", redis_server.url, "--tag", tag]
    argv += ["--port", str(port), "--hosts", "2"]
    env = {k: v for k, v in os.environ.items() if k not in ("CODEMOJEX_HOST_URL", "REDIS_URL")}
    log = tmp_path / "host.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    parent = psutil.Process(proc.pid)
    try:
        deadline = time.monotonic() + 90  # two processes import the app on a busy machine
        redis_port = int(redis_server.url.rsplit(":", 1)[1].split("/")[0])
        answered: set[int] = set()
        while len(answered) < 2:
            assert time.monotonic() < deadline, f"both did not answer: {answered} {log.read_text()}"
            try:  # a new connection each time, so the kernel spreads them over both processes
                with httpx.Client(timeout=2) as client:
                    assert client.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            except httpx.TransportError:
                time.sleep(0.1)
                continue
            for host in _hosts(parent):
                connections = host.net_connections("tcp")
                if any(c.raddr and c.raddr.port == redis_port for c in connections):
                    answered.add(host.pid)
        hosts = _hosts(parent)
        assert len(hosts) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
        gone, alive = psutil.wait_procs(hosts, timeout=10)
        assert not alive
        assert {p.pid for p in gone} == answered
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
