"""Setting the Redis users up (:mod:`codemojex.access`): the password file, ``codemojex acl`` on a Redis
of one's own, and secrets an earlier version kept within the host's reach moved out of it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
import redis

from codemojex import access
from codemojex.game import Game
from codemojex.keys import GameKeys


def test_the_password_file_is_for_its_owner_alone(tmp_path):
    kept = access.passwords_at(tmp_path / "redis-users.json")
    assert os.stat(tmp_path / "redis-users.json").st_mode & 0o777 == 0o600
    assert access.passwords_at(tmp_path / "redis-users.json") == kept  # kept across starts
    assert len(set(kept.values())) == len(kept)


def test_codemojex_acl_prints_then_applies_the_users_on_a_redis_of_ones_own(redis_server, tag, tmp_path):
    file = tmp_path / "users.json"

    def cmx(*args: str) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "codemojex.cli",
                "--tag",
                tag,
                "--json",
                "acl",
                "--passwords",
                str(file),
                *args,
            ],
            env=dict(env, REDIS_URL=redis_server.url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    printed = cmx()
    passwords = access.read_passwords(file)
    assert file.stat().st_mode & 0o777 == 0o600
    assert printed["applied"] is False
    assert all(password not in " ".join(printed["commands"]) for password in passwords.values())
    host = redis.Redis(
        port=redis_server.port, username=access.user_name(access.HOST, tag), password=passwords["host"]
    )
    try:
        with pytest.raises(redis.AuthenticationError):  # printed, not applied
            host.ping()
        assert cmx("--apply")["applied"] is True
        assert host.ping()
        assert host.get(GameKeys(tag).round("RND00T4D8CZQFHDN9MDMK25ZBR")) is None  # its own keys
        with pytest.raises(redis.exceptions.NoPermissionError):
            host.get(GameKeys(tag).secret("RND00T4D8CZQFHDN9MDMK25ZBR"))
    finally:
        host.close()


def test_serve_moves_secrets_of_an_earlier_version_out_of_the_hosts_reach(acl):
    keys = GameKeys(acl.tag)
    round_id = "RND00T4D8CZQFHDN9MDMK25ZBR"
    admin, host = acl.client(access.ADMIN), acl.client(access.HOST)
    try:
        admin.set(f"{keys.prefix}secret:{round_id}", '["x"]')
        assert host.get(f"{keys.prefix}secret:{round_id}") == b'["x"]'  # where it was: the host read it

        async def move() -> int:
            async with Game.from_url(acl.url(access.ADMIN), acl.tag) as game:
                return await access.move_legacy_secrets(game.redis, acl.tag)

        assert asyncio.run(move()) == 1
        assert admin.get(keys.secret(round_id)) == b'["x"]'
        assert host.get(f"{keys.prefix}secret:{round_id}") is None
    finally:
        admin.close()
        host.close()
