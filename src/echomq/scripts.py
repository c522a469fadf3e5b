"""The registry of Lua scripts: EchoMQ's own, and those of an application that finishes jobs atomically.

Each state change is one script in ``<package>/lua/<name>.lua``, named after the Python function that
runs it, and opening with its contract (KEYS, ARGV, return values). Scripts are read once from the
package data and registered on a client with redis-py's ``register_script``, which runs them by
EVALSHA and falls back on NOSCRIPT (a restarted server, a new cluster node); pipelines preload them.

A :class:`Library` is one package's scripts with the number of KEYS each declares; every call checks
it, and a unit test checks it against each script's header. :data:`ECHOMQ` is EchoMQ's own library.

Includes
========
A line ``-- @include "<name>"`` in a script is replaced by ``echomq/lua/includes/<name>.lua`` when the
script is read (as BullMQ's scripts include their shared parts); a script of another package's
:class:`Library` may also include that package's own ``lua/includes/<name>.lua``, looked up first
(codemojex's ``ledger``). The includes define ``local function`` helpers that take keys and values as
parameters and never read ``KEYS`` or ``ARGV``:

* ``admit``: ``admission_of(jobKey, statsKey, lane, digest)`` (the reply for an id that has a row, or
  nil) and ``admit_new(...)`` (write a new row on its lane), the two halves of ``enqueue.lua``;
* ``finish``: ``fence(jobKey, statsKey, token, request)`` (nil when the job is active under ``token``
  and claimed by the claim call ``request``, or by any when ``request`` is '', else the refusal reply)
  and ``complete_job(..., prefix, resultTtl, dedupWindow)`` (active -> done, after trimming a few
  expired done rows), the two halves of ``complete.lua``; it includes ``trim``;
* ``effects``: ``read_effects``, ``check_effects`` and ``apply_effects``, an application's Redis writes
  checked whole against the data before the first one runs (``complete_effects.lua``);
* ``trim``: ``trim_expired(setKey, statsKey, prefix, now, ttl, window, count)``, the retention rule of
  finished rows (done and dead), and ``TRIM_PER_FINISH``, what each finish trims.

A script that calls ``complete_job`` passes the bus prefix, result ttl and dedup window (in ms) that
:func:`echomq.core.finish_args` gives, in that order, so trimming is amortised with the work on every
path that finishes a job (see ``includes/trim.lua``).

They are EchoMQ's public Lua API for an application whose script does its effect and the fenced
completion in one step (codemojex's score script does), so no window exists between the two. One
package alone would not need an include step; two packages whose scripts must admit and finish a job
exactly as the queue does would otherwise copy those lines and let them drift, so this one line-level
substitution (no templating, no build step) is the lesser evil. Keys of
the application must share the bus's hash tag to be touched by the same script on a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from importlib import resources
from typing import Any, Generic, TypeVar

from redis import Redis as SyncRedis
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster as SyncRedisCluster
from redis.commands.core import AsyncScript, Script
from redis.exceptions import NoScriptError, RedisError, ResponseError

from echomq._wire import AsyncWire, SyncWire, pack, pack_load

KEY_COUNTS: dict[str, int] = {
    "enqueue": 7,
    "claim": 6,
    "complete": 4,
    "complete_effects": 4,  # and one key per effect key after these (VARIADIC)
    "fail": 9,
    "extend": 3,
    "release": 7,
    "retry_dead": 6,
    "delete_dead": 3,
    "sweep": 9,
    "stats": 7,
    "flow": 6,
    "cancel": 6,
    "revoke": 6,
    "await": 1,
    "progress": 2,
}

# Scripts whose KEYS go on past the declared ones: complete_effects takes the keys of its effects after
# its four (a header documents such a tail as KEYS[n...]); a call gives at least the declared count.
VARIADIC: frozenset[str] = frozenset({"complete_effects"})

_INCLUDE = re.compile(r'^-- @include "([a-z_]+)"$', re.MULTILINE)


@cache
def _read(package: str, *parts: str) -> str:
    return resources.files(package).joinpath("lua", *parts).read_text(encoding="utf-8")


def include(name: str, package: str = "echomq") -> str:
    """The text of ``<package>/lua/includes/<name>.lua`` (``package``'s own include), else of
    ``echomq/lua/includes/<name>.lua``, its own includes expanded."""
    if not re.fullmatch(r"[a-z_]+", name):
        raise KeyError(f"no include named {name!r}")
    for owner in dict.fromkeys((package, "echomq")):
        try:
            text = _read(owner, "includes", f"{name}.lua")
        except FileNotFoundError:
            continue
        return _expand(text, owner)
    raise KeyError(f"no include named {name!r}")


def _expand(text: str, package: str = "echomq") -> str:
    """``text`` with each ``-- @include`` line replaced by that include (an include may include another;
    none includes itself, directly or not, so this ends)."""
    return _INCLUDE.sub(lambda match: include(match.group(1), package).rstrip("\n"), text)


@dataclass(frozen=True)
class Library:
    """The scripts of ``package`` (in its ``lua/`` folder) and the number of KEYS each takes (at least,
    for those named in ``variadic``)."""

    package: str
    counts: Mapping[str, int]
    variadic: frozenset[str] = frozenset()

    def source(self, name: str) -> str:
        """The text of ``lua/<name>.lua`` with its includes expanded."""
        if name not in self.counts:
            raise KeyError(f"no script named {name!r} in {self.package}")
        return _expand(_read(self.package, f"{name}.lua"), self.package)


ECHOMQ = Library("echomq", KEY_COUNTS, VARIADIC)


def source(name: str) -> str:
    """The text of EchoMQ's ``lua/<name>.lua``, includes expanded."""
    return ECHOMQ.source(name)


ScriptT = TypeVar("ScriptT", Script, AsyncScript)


class _Registry(Generic[ScriptT]):
    def __init__(self, library: Library, scripts: dict[str, ScriptT]) -> None:
        self.library = library
        self._scripts: dict[str, ScriptT] = scripts

    def get(self, name: str, keys: list[str]) -> ScriptT:
        """The script ``name``, after checking that ``keys`` has its declared count (or more, for a
        variadic script)."""
        expected = self.library.counts[name]
        if len(keys) != expected and not (name in self.library.variadic and len(keys) > expected):
            raise AssertionError(f"{name}.lua takes {expected} keys, got {len(keys)}")
        return self._scripts[name]


class AsyncScripts(_Registry[AsyncScript]):
    """The scripts of ``library`` bound to an asyncio client; with a ``wire`` (a plain client's, see
    :mod:`echomq._wire`) a call outside a pipeline is packed once and sent on it."""

    def __init__(
        self,
        client: AsyncRedis | AsyncRedisCluster,
        library: Library = ECHOMQ,
        wire: AsyncWire | None = None,
    ) -> None:
        super().__init__(
            library, {name: client.register_script(library.source(name)) for name in library.counts}
        )
        self.client = client
        self.wire = wire

    async def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run ``name`` on the bound client, or on ``client`` (a pipeline) when given."""
        script = self.get(name, keys)
        if client is None and self.wire is not None:
            command = pack(script.sha, keys, args)
            try:
                return await self.wire.call(command)
            except NoScriptError:  # nothing ran (a restarted server): load it, then run it, on the wire
                await self.wire.call(pack_load(script.script))
                return await self.wire.call(command)
        if client is None and isinstance(self.client, AsyncRedisCluster):
            try:
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:  # on every primary (mid-move the call runs on the slot's target),
                try:  # else on the key's node at least (a primary down must not fail the others)
                    await self.client.script_load(script.script)
                except RedisError:
                    node = self.client.get_node_from_key(keys[0])
                    await self.client.execute_command("SCRIPT LOAD", script.script, target_nodes=node)
                return await self.client.evalsha(script.sha, len(keys), *keys, *args)
        return await script(keys=keys, args=args, client=client)

    async def run_many(self, name: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run ``name`` once per ``(keys, args)`` in one round trip (not a transaction), in order: each
        reply, or its error as a value. Not on a cluster client (redis-py's cluster pipeline refuses
        scripts)."""
        scripts = [self.get(name, keys) for keys, _ in calls]
        if self.wire is None:
            pipe: Any
            async with self.client.pipeline(transaction=False) as pipe:
                for script, (keys, args) in zip(scripts, calls, strict=True):
                    await script(keys=keys, args=args, client=pipe)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
            return replies
        commands = [pack(script.sha, keys, args) for script, (keys, args) in zip(scripts, calls, strict=True)]
        replies = await self.wire.call_many(b"".join(commands), len(calls))
        missing = _missing(replies)
        if missing:  # nothing of those ran (a restarted server): load the script, then run them again
            await self.wire.call(pack_load(scripts[missing[0]].script))
            again = await self.wire.call_many(b"".join(commands[i] for i in missing), len(missing))
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return replies


def _missing(replies: list[Any]) -> list[int]:
    """The positions of a batch's NOSCRIPT replies."""
    return [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]


class SyncScripts(_Registry[Script]):
    """The scripts of ``library`` bound to a blocking client (the lease keeper thread and
    :class:`echomq.SyncBus` use these); with a ``wire``, as :class:`AsyncScripts`."""

    def __init__(
        self, client: SyncRedis | SyncRedisCluster, library: Library = ECHOMQ, wire: SyncWire | None = None
    ) -> None:
        super().__init__(
            library, {name: client.register_script(library.source(name)) for name in library.counts}
        )
        self.client = client
        self.wire = wire

    def run(self, name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
        """Run ``name`` on the bound client, or on ``client`` (a pipeline) when given."""
        script = self.get(name, keys)
        if client is None and self.wire is not None:
            command = pack(script.sha, keys, args)
            try:
                return self.wire.call(command)
            except NoScriptError:  # nothing ran: load it, then run it
                self.wire.call(pack_load(script.script))
                return self.wire.call(command)
        if client is None and isinstance(self.client, SyncRedisCluster):
            try:
                return self.client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:  # on every primary, else on the key's node (as the asyncio path)
                try:
                    self.client.script_load(script.script)
                except RedisError:
                    node = self.client.get_node_from_key(keys[0])  # type: ignore[no-untyped-call]
                    self.client.execute_command(  # type: ignore[no-untyped-call]
                        "SCRIPT LOAD", script.script, target_nodes=node
                    )
                return self.client.evalsha(script.sha, len(keys), *keys, *args)
        return script(keys=keys, args=args, client=client)

    def run_many(self, name: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """As :meth:`AsyncScripts.run_many`; on a cluster client one call after another."""
        scripts = [self.get(name, keys) for keys, _ in calls]
        pairs = list(zip(scripts, calls, strict=True))
        if self.wire is None:
            if isinstance(self.client, SyncRedisCluster):
                return [_settled_sync(partial(s, keys=keys, args=args)) for s, (keys, args) in pairs]
            pipe = self.client.pipeline(transaction=False)
            for script, (keys, args) in pairs:
                script(keys=keys, args=args, client=pipe)
            replies: list[Any] = pipe.execute(raise_on_error=False)
            return replies
        commands = [pack(s.sha, keys, args) for s, (keys, args) in pairs]
        replies = self.wire.call_many(b"".join(commands), len(calls))
        missing = _missing(replies)
        if missing:
            self.wire.call(pack_load(scripts[missing[0]].script))
            again = self.wire.call_many(b"".join(commands[i] for i in missing), len(missing))
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return replies


def _settled_sync(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ResponseError as error:
        return error
