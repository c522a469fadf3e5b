"""``codemojex serve --hosts N``: serve's own host and N - 1 ``python -m codemojex.web --fd`` processes
accept on one port; each answers; serve stops them with itself."""

from __future__ import annotations

import time

import httpx
import psutil

from echomq.testing.server import free_port
from tests.integration.test_serve import Serve


def _more_hosts(serve_pid: int) -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process(serve_pid).children()
        if "codemojex.web" in child.cmdline() and "--fd" in child.cmdline()
    ]


def _holds_redis(process: psutil.Process, redis_port: int) -> bool:
    return any(c.raddr and c.raddr.port == redis_port for c in process.net_connections("tcp"))


def test_serve_with_two_hosts_answers_from_both_and_stops_both(tmp_path, redis_server, tag):
    """serve --hosts 2 starts one more host process on its port, which answers requests (it holds a
    Redis connection of its own once it has) with serve's operator token and limits; SIGINT stops it."""
    port = free_port()
    redis_port = int(redis_server.url.rsplit(":", 1)[1].split("/")[0])
    serve = Serve(tmp_path / "data", port, redis_url=redis_server.url, tag=tag, extra=("--hosts", "2"))
    try:
        operator = serve.wait_up()
        assert "hosts:     2 web host processes on the port" in serve.output
        [other] = _more_hosts(serve.process.pid)
        deadline = time.monotonic() + 90  # the other process imports the app on a busy machine
        while not _holds_redis(other, redis_port):
            assert time.monotonic() < deadline, f"the second host never answered:\n{serve.output}"
            headers = {"Authorization": f"Bearer {operator}"}
            try:  # a new connection each time: the kernel hands some to each process
                with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=5) as client:
                    assert client.get("/api/operator/stats").status_code == 200
            except httpx.TransportError:
                time.sleep(0.1)
        assert serve.stop() == 0
        _, alive = psutil.wait_procs([other], timeout=10)
        assert not alive
    finally:
        serve.kill()
