"""A redis-server with the game's Redis users (:mod:`codemojex.access`), as the embedded one of ``make
run`` has them: read from a redis.conf, the default user off; and the URL of each role."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from codemojex import access, rounds
from codemojex.game import Game
from echomq.testing.server import RedisProcess


class Acl:
    """A redis-server whose users are the game's on ``tag`` (default user off), and their URLs; a game
    spread over ``partitions`` > 1 has its users' keys on every partition's tag."""

    def __init__(self, folder: Path, tag: str, partitions: int = 1) -> None:
        self.tag = tag
        self.passwords = access.passwords_at(folder / "redis-users.json")
        config = folder / "redis.conf"
        config.write_text("\n".join(access.config_lines(tag, self.passwords, partitions)) + "\n")
        admin = (access.user_name(access.ADMIN, tag), self.passwords[access.ADMIN])
        self.server = RedisProcess(folder / "data", appendonly=False, config=config, probe_user=admin)

    def url(self, role: str) -> str:
        return access.with_user(self.server.url, access.user_name(role, self.tag), self.passwords[role])

    def client(self, role: str) -> redis.Redis:
        return redis.Redis.from_url(self.url(role))


@pytest.fixture
def acl(tmp_path, tag) -> Iterator[Acl]:
    server = Acl(tmp_path, tag)
    server.server.start()
    yield server
    server.server.close()


def admin_round(acl: Acl, keyboard: list[str]) -> tuple[str, list[str]]:
    """A round opened as the admin (scripts loaded first, as serve does): its id and its secret."""

    async def open_one() -> tuple[str, list[str]]:
        async with Game.from_url(acl.url(access.ADMIN), acl.tag) as game:
            await access.load_scripts(game.redis)
            opened = await rounds.open_round(game, keyboard=keyboard)
            return opened.id, list(await rounds.read_secret(game, opened.id))

    return asyncio.run(open_one())
