"""echomq.testing.server: the real redis-server processes that the tests, the demo and the benchmark run."""

from __future__ import annotations

import contextlib
import socket

import pytest
import redis

from echomq.testing.server import RedisProcess, ServerError, find_redis_server


def test_the_binary_comes_from_redis_server_when_set(monkeypatch, tmp_path):
    """$REDIS_SERVER names the binary; a path that is not a file is refused with a clear error."""
    binary = find_redis_server()
    monkeypatch.setenv("REDIS_SERVER", binary)
    assert find_redis_server() == binary
    monkeypatch.setenv("REDIS_SERVER", str(tmp_path / "missing"))
    with pytest.raises(ServerError, match="is not a file"):
        find_redis_server()


def test_a_killed_server_restarts_on_its_aof_with_every_acknowledged_write(tmp_path):
    """SIGKILL with appendfsync always loses no acknowledged write: the restart replays the AOF."""
    server = RedisProcess(tmp_path / "data", appendonly=True, appendfsync="always")
    server.start()
    try:
        client = redis.Redis(port=server.port)
        for i in range(100):
            client.rpush("emq:{t}:probe", i)
        client.close()
        server.kill()
        assert server.process is not None
        assert server.process.returncode == -9
        server.start()
        client = redis.Redis(port=server.port)
        assert [int(x) for x in client.lrange("emq:{t}:probe", 0, -1)] == list(range(100))
        client.close()
    finally:
        server.close()


def test_a_server_never_takes_the_default_port():
    """Every test server listens on a free ephemeral port, never on 6379."""
    with RedisProcess(appendonly=False) as server:
        assert server.port != 6379
        assert redis.Redis(port=server.port).ping()


def test_a_port_taken_by_another_program_never_gets_the_probe_password(tmp_path):
    """Another program listening on the port the server is to take (a port remembered by serve, taken
    meanwhile): the server cannot bind it and the start fails, and the readiness probe never connects
    to that program, so it never sends it the probe user's password."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(8)
        squatter.settimeout(0.5)
        port = squatter.getsockname()[1]
        server = RedisProcess(tmp_path / "data", port=port, probe_user=("admin", "the-admin-password"))
        with pytest.raises(ServerError):
            server.start()
        heard = b""
        with contextlib.suppress(TimeoutError):
            while True:
                connection, _ = squatter.accept()
                with connection:
                    connection.settimeout(0.5)
                    with contextlib.suppress(TimeoutError, OSError):
                        heard += connection.recv(4096)
        assert b"the-admin-password" not in heard
        assert heard == b"", "no connection carried anything to the other program"
