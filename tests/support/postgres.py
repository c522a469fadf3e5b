"""A PostgreSQL server of the test's own: initdb in a temporary folder, started on a free loopback port,
stopped and removed at the end. Never the machine's server (5432): nothing here connects to it.

The binaries are found in ``$PG_BINDIR``, else the newest ``/usr/lib/postgresql/<version>/bin`` (Debian's
layout), else on PATH; with none, :func:`find_bindir` says why (the test is then skipped, saying so).
initdb and postgres refuse to run as root: as root they run as the ``postgres`` system user (``runuser``),
in a folder it owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from echomq.testing.server import free_port

START_TIMEOUT_S = 30.0


def find_bindir() -> tuple[Path | None, str]:
    """The folder of initdb and pg_ctl, or None and the reason none was found."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("initdb")
    candidates.append(str(Path(on_path).parent) if on_path else "")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root with no 'postgres' user to run initdb as (initdb refuses root)"
    for folder in filter(None, candidates):
        if all(os.access(Path(folder, tool), os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(folder), ""
    return None, "no PostgreSQL binaries (initdb, pg_ctl): set PG_BINDIR or install the postgresql package"


def _version(folder: str) -> int:
    try:
        return int(Path(folder).parent.name.split(".")[0])
    except ValueError:
        return 0


class PostgresProcess:
    """One PostgreSQL server: :meth:`start` (initdb, then pg_ctl start on a free port), :attr:`dsn`,
    :meth:`close` (pg_ctl stop -m immediate, then the folder removed)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="echomq-pg-"))
        self.data = self.folder / "data"
        self.user = "postgres"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root: run as the postgres system user
            account = pwd.getpwnam("postgres")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres connect_timeout=5"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as, str(self.bindir / tool), *args],
            check=True,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S * 2,
        )

    def start(self) -> PostgresProcess:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user, "--no-sync", "-E", "UTF8")
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.folder}"
            " -c fsync=off -c max_connections=20 -c shared_buffers=16MB"
        )
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "-t", "30", "start")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not accept connections on {self.port}")
            time.sleep(0.1)
        return self

    def _ready(self) -> bool:
        probe = [str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        return subprocess.run(probe, check=False, timeout=10).returncode == 0

    def close(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresProcess:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
