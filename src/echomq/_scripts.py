"""The one registry of EchoMQ's Lua scripts.

Each state change is one script in ``echomq/lua/<name>.lua``, named after the Python function that
runs it, and opening with its contract (KEYS, ARGV, return values). Scripts are read once from the
package data and registered on a client with redis-py's ``register_script``, which runs them by
EVALSHA and falls back on NOSCRIPT (a restarted server, a new cluster node); pipelines preload them.

:data:`KEY_COUNTS` is the number of KEYS each script declares; every call checks it, and a unit test
checks it against each script's header.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar

from redis import Redis as SyncRedis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster as SyncRedisCluster
from redis.commands.core import AsyncScript, Script

KEY_COUNTS: dict[str, int] = {
    "enqueue": 7,
    "claim": 6,
    "complete": 4,
    "fail": 9,
    "extend": 3,
    "release": 7,
    "retry_dead": 6,
    "sweep": 9,
    "stats": 7,
}


@cache
def source(name: str) -> str:
    """The text of ``lua/<name>.lua``."""
    if name not in KEY_COUNTS:
        raise KeyError(f"no script named {name!r}")
    return resources.files("echomq").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


ScriptT = TypeVar("ScriptT", Script, AsyncScript)


class _Registry(Generic[ScriptT]):
    def __init__(self, scripts: dict[str, ScriptT]) -> None:
        self._scripts: dict[str, ScriptT] = scripts

    def get(self, name: str, keys: list[str]) -> ScriptT:
        """The script ``name``, after checking that ``keys`` has its declared count."""
        expected = KEY_COUNTS[name]
        if len(keys) != expected:
            raise AssertionError(f"{name}.lua takes {expected} keys, got {len(keys)}")
        return self._scripts[name]


class AsyncScripts(_Registry[AsyncScript]):
    """Scripts bound to an asyncio client."""

    def __init__(self, client: AsyncRedis | AsyncRedisCluster) -> None:
        super().__init__({name: client.register_script(source(name)) for name in KEY_COUNTS})

    async def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run ``name`` on the bound client, or on ``client`` (a pipeline) when given."""
        return await self.get(name, keys)(keys=keys, args=args, client=client)


class SyncScripts(_Registry[Script]):
    """Scripts bound to a blocking client (the lease keeper thread uses these)."""

    def __init__(self, client: SyncRedis | SyncRedisCluster) -> None:
        super().__init__({name: client.register_script(source(name)) for name in KEY_COUNTS})

    def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run ``name`` on the bound client, or on ``client`` (a pipeline) when given."""
        return self.get(name, keys)(keys=keys, args=args, client=client)
