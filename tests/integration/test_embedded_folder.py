"""The data folder of ``codemojex serve`` under attack (issue 13, adversarial review): its files are
never written through a symlink planted in the folder (the link is replaced, its target untouched), the
remembered port is not believed from a symlink, and ``codemojex redis-url`` hands out the operator's
password only for a port the folder's own embedded redis-server listens on: never for a Redis that serve
did not start (another program holding the remembered port while serve is down); and the AOF (secrets,
wallets) is its owner's alone."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import redis

from codemojex import access
from codemojex.embedded import (
    CONFIG_FILE,
    PASSWORDS_FILE,
    PORT_FILE,
    ServeError,
    cli_url,
    embedded_redis,
    folder_lock,
    kept_port,
    remember_port,
)

PRECIOUS = "not yours to overwrite\n"


def _planted(data_dir: Path, name: str, tmp_path: Path) -> Path:
    """A symlink ``data_dir/name`` to a file outside the folder; the file."""
    target = tmp_path / f"outside-{name}"
    target.write_text(PRECIOUS)
    data_dir.mkdir(exist_ok=True)
    (data_dir / name).symlink_to(target)
    return target


def test_remembering_the_port_replaces_a_symlink_and_never_writes_through_it(tmp_path):
    data_dir = tmp_path / "data"
    target = _planted(data_dir, PORT_FILE, tmp_path)
    remember_port(data_dir, 23456)
    assert target.read_text() == PRECIOUS, "the link's target is untouched"
    assert not (data_dir / PORT_FILE).is_symlink()
    assert kept_port(data_dir) == 23456


def test_a_symlinked_port_file_is_not_believed(tmp_path):
    data_dir = tmp_path / "data"
    target = _planted(data_dir, PORT_FILE, tmp_path)
    target.write_text("23456\n")
    assert kept_port(data_dir) is None


@pytest.mark.parametrize("name", [CONFIG_FILE, PASSWORDS_FILE])
def test_the_redis_config_and_passwords_replace_a_symlink(tmp_path, name):
    data_dir = tmp_path / "data"
    target = _planted(data_dir, name, tmp_path)
    embedded_redis(data_dir, "cm")  # writes the passwords (first start) and the config, starts nothing
    assert target.read_text() == PRECIOUS, "the link's target is untouched"
    written = data_dir / name
    assert not written.is_symlink()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_redis_url_refuses_a_port_held_by_a_redis_serve_did_not_start(tmp_path, redis_server):
    """serve is down and another redis-server (any program) holds the remembered port: the operator's
    password must not be sent to it."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    access.passwords_at(data_dir / PASSWORDS_FILE)
    remember_port(data_dir, redis_server.port)
    with pytest.raises(ServeError, match="start `codemojex serve`"):
        cli_url(data_dir)


def test_redis_url_names_the_port_of_the_folders_own_running_redis(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()  # serve's folder lock makes it
    server = embedded_redis(data_dir, "cm").start()
    try:
        remember_port(data_dir, server.port)
        url = cli_url(data_dir)
        assert f"@127.0.0.1:{server.port}/" in url
        password = json.loads((data_dir / PASSWORDS_FILE).read_text())[access.OPERATOR]
        assert access.with_user(f"redis://127.0.0.1:{server.port}/0", "cmx-operator-cm", password) == url
    finally:
        server.stop()
    with pytest.raises(ServeError):  # stopped: the port is nobody's the folder knows
        cli_url(data_dir)


def test_the_data_folder_and_the_aof_are_their_owners_alone(tmp_path):
    """The AOF holds every live round's secret and every wallet: no other local user may read it,
    whatever the umask. A new folder is 0700; an existing folder (a shared one given with
    ``--data-dir``) keeps its mode, and the server's own files are private in it."""
    fresh, shared = tmp_path / "fresh", tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    with folder_lock(fresh), folder_lock(shared):
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
        assert stat.S_IMODE(shared.stat().st_mode) == 0o755, "a folder serve did not make keeps its mode"
        server = embedded_redis(shared, "cm").start()
        try:
            admin = access.user_name(access.ADMIN, "cm")
            password = access.read_passwords(shared / PASSWORDS_FILE)[access.ADMIN]
            client = redis.Redis(port=server.port, username=admin, password=password)
            client.set("cmx:{cm}:probe", "secret")
            client.bgrewriteaof()
            client.close()
        finally:
            server.stop()
    written = [path for path in shared.rglob("*") if path.name.startswith(("appendonly", "redis.log"))]
    assert written, "the server wrote its AOF and log"
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path.name} is its owner's alone"


def test_server_files_of_an_earlier_version_are_closed_at_the_next_start(tmp_path):
    """An AOF written before the embedded server ran with umask 077 (readable by all) is made its
    owner's alone when serve prepares the server again."""
    data_dir = tmp_path / "data"
    (data_dir / "appendonlydir").mkdir(parents=True)
    older = [data_dir / "appendonlydir" / "appendonly.aof.1.incr.aof", data_dir / "redis.log"]
    for path in older:
        path.write_text("old\n")
        path.chmod(0o644)
    (data_dir / "appendonlydir").chmod(0o755)
    embedded_redis(data_dir, "cm")
    for path in [*older, data_dir / "appendonlydir"]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path.name


def test_the_embedded_redis_frees_expired_keys_off_its_main_thread(tmp_path):
    """An expired tombstone hash (about 65 s of finished ids, up to ~900,000 fields at full speed) is
    freed in a background thread, not on the main thread where it would stall every client."""
    data_dir = tmp_path / "data"
    with folder_lock(data_dir):
        server = embedded_redis(data_dir, "cm").start()
        try:
            admin = access.user_name(access.ADMIN, "cm")
            password = access.read_passwords(data_dir / PASSWORDS_FILE)[access.ADMIN]
            client = redis.Redis(port=server.port, username=admin, password=password)
            assert client.config_get("lazyfree-lazy-expire") == {"lazyfree-lazy-expire": "yes"}
            client.close()
        finally:
            server.stop()
