"""Least privilege on Redis: one ACL user per role of a game, each allowed only the commands and keys its
role needs. The rules are built here, from the bus tag, and only here.

========== =========================================== ===============================================
user       keys                                        commands
========== =========================================== ===============================================
host       ``cmx:{t}:*`` ``emq:{t}:*``                 the game's data commands, ``EVALSHA``,
                                                       ``SCRIPT EXISTS``
worker     the host's and ``cmxs:{t}:*`` (the secrets)  the host's and ``SCRIPT LOAD``
operator   as the worker (``codemojex round ...``)     as the worker
========== =========================================== ===============================================

Every user starts from ``reset`` (no password, no key, no channel, ``-@all``) and gets an allow-list,
so whatever is not listed is NOPERM: ``EVAL``, ``SCRIPT LOAD`` / ``FLUSH`` (for the host), ``FUNCTION``,
``MODULE``, ``CONFIG``, ``DEBUG``, ``MONITOR``, ``KEYS``, ``SCAN``, ``SORT``, ``DUMP`` / ``RESTORE``,
``OBJECT``, ``MIGRATE``, ``FLUSHALL`` / ``FLUSHDB``, ``ACL``, ``SHUTDOWN``, ``SELECT``, ``MOVE``,
pub/sub... Redis checks the keys of ``EVALSHA`` and every command a script runs against the caller's
rights, so a script the host runs cannot reach a secret either; the host may only run scripts already
in the server's cache, loaded by a process that may (:func:`load_scripts`: ``serve`` at its start, the
score worker each sweep period, :mod:`codemojex.upkeep`). ACL cannot name the scripts a user may run
by SHA, but whatever script the host runs runs with the host's rights; per-function rights (Redis
Functions, ``FCALL``) would need Redis 7, and the game supports 6.2. A call of the host that meets an
empty script cache (a restarted Redis) and may not load is :class:`~codemojex.errors.Unavailable` (503 with
``Retry-After``) until the worker has loaded them.

The secrets live under ``cmxs:{t}:`` (:mod:`codemojex.keys`): ACL key patterns are allow-lists, so the
host's ``cmx:{t}:*`` does not match them, while the shared ``{t}`` hash tag keeps them in the bus's slot.
A round is opened and closed by the worker, on the host's request carried as a job
(:mod:`codemojex.round_jobs`); the host shows a closed round's secret from its *revealed* copy.

:func:`provision` applies the rules with ``ACL SETUSER`` over an admin connection (``codemojex acl
--apply``), :func:`config_lines` writes them as ``user`` directives of a redis.conf (the embedded Redis of
``make run``, :mod:`codemojex.embedded`). Passwords are kept as SHA-256 in both (``#<hex>``), never in
clear on a command line. On a Redis Cluster, apply the same rules on every node (``ACL SETUSER`` is not
propagated): ``codemojex acl --apply`` against each node's URL.

The worker's check of ``maxmemory-policy`` (``CONFIG GET``, :mod:`echomq.worker.eviction`) is denied to it
and skipped (logged at DEBUG): check the policy as the admin.

Adding to the game: a new key goes under ``cmx:{t}:`` (the host may touch it) unless the host must not;
a command a new script or call uses goes in :data:`DATA` (else the host's call is NOPERM: the least-
privilege test of the web API shows it); a new script library goes in :func:`load_scripts`'s default.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from codemojex.game import LIBRARY, translate_errors
from codemojex.keys import GameKeys
from codemojex.proof import demo_tag
from echomq.keyspace import Keyspace
from echomq.partition_layout import partition_tags
from echomq.scripts import ECHOMQ, Library

HOST, WORKER, OPERATOR, ADMIN = "host", "worker", "operator", "admin"
ROLES = (HOST, WORKER, OPERATOR)

# What every client needs to connect and say who it is (redis-py's handshake), and the server clock.
CONNECTION = ("ping", "echo", "hello", "auth", "client|setname", "client|getname", "client|id", "time")
# The data commands of the game's scripts and of its Python code, on the keys a user may touch.
DATA = (
    "get", "getdel", "mget", "set", "del", "unlink", "exists", "type", "ttl", "pttl", "expire", "pexpire",
    "pexpireat", "incr", "incrby",
    "hget", "hmget", "hgetall", "hset", "hsetnx", "hdel", "hincrby", "hexists", "hlen", "hscan",
    "zadd", "zrem", "zrange", "zrevrange", "zrangebyscore", "zrevrangebyscore", "zrangebylex", "zscore",
    "zcard", "zcount", "zrank", "zrevrank", "zpopmin", "zscan",
    "lpush", "rpush", "lpop", "rpop", "lrange", "llen", "lindex", "lmove", "blpop", "ltrim", "lrem",
    "hkeys", "zremrangebyscore",  # echomq's flow gates (include "gates") and stats
    "sadd", "srem", "sismember", "smembers", "srandmember",  # ... the lanes a gate holds
    "xadd", "xread", "xrange", "xrevrange", "xlen", "xtrim",
    "multi", "exec", "discard", "watch", "unwatch",
)  # fmt: skip
RUN_SCRIPTS = ("evalsha", "script|exists")  # redis-py's pipelines check the cache with SCRIPT EXISTS
LOAD_SCRIPTS = ("script|load",)


@dataclass(frozen=True, slots=True)
class Rules:
    """One user's rights: its key patterns and allowed commands (everything else is denied)."""

    user: str
    keys: tuple[str, ...]
    commands: tuple[str, ...]

    def setuser_args(self, password: str) -> list[str]:
        """The arguments of ``ACL SETUSER`` (after the user name); the password as its SHA-256."""
        return [
            "reset",
            "on",
            f"#{password_hash(password)}",
            "resetchannels",
            *(f"~{pattern}" for pattern in self.keys),
            "-@all",
            *(f"+{command}" for command in self.commands),
        ]


def user_name(role: str, tag: str) -> str:
    """The ACL user of ``role`` for the game on ``tag``, e.g. ``cmx-host-cm``."""
    return f"cmx-{role}-{GameKeys(tag).tag}"


def rules(role: str, tag: str, partitions: int = 1) -> Rules:
    """The rules of ``role`` (host, worker, operator) for the game on bus ``tag`` and the proof's demo
    game beside it (``<tag>.proof``, :mod:`codemojex.proof`), whose secrets are kept from the host alike.
    A game spread over ``partitions`` > 1 (:mod:`codemojex.spread`) is on the tags ``<tag>.0`` ...
    ``<tag>.<P-1>``, each named (no pattern over ``<tag>.*``, which would match other tags too)."""
    tags = [tag] if partitions == 1 else partition_tags(tag, partitions)
    games = (*(GameKeys(one) for one in tags), GameKeys(demo_tag(tag)))
    public = tuple(pattern for game in games for pattern in (game.pattern, Keyspace(game.tag).pattern))
    if role == HOST:
        return Rules(user_name(role, tag), public, (*CONNECTION, *DATA, *RUN_SCRIPTS))
    if role in (WORKER, OPERATOR):
        keys = (*public, *(f"{game.secret_prefix}*" for game in games))
        return Rules(user_name(role, tag), keys, (*CONNECTION, *DATA, *RUN_SCRIPTS, *LOAD_SCRIPTS))
    raise ValueError(f"no role {role!r}; the roles are {', '.join(ROLES)}")


def password_hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def new_passwords(roles: tuple[str, ...] = (*ROLES, ADMIN)) -> dict[str, str]:
    """A fresh password per role: 32 bytes from :mod:`secrets`."""
    return {role: secrets.token_urlsafe(32) for role in roles}


def config_lines(tag: str, passwords: Mapping[str, str], partitions: int = 1) -> list[str]:
    """``user`` directives of a redis.conf: the default user off, an admin user (everything) and the
    game's users, passwords as SHA-256."""
    admin = f"user {user_name(ADMIN, tag)} reset on #{password_hash(passwords[ADMIN])} ~* &* +@all"
    game = [_directive(rules(role, tag, partitions), passwords[role]) for role in ROLES]
    return ["user default reset off", admin, *game]


def _directive(rule: Rules, password: str) -> str:
    return " ".join(["user", rule.user, *rule.setuser_args(password)])


async def provision(admin: Any, tag: str, passwords: Mapping[str, str], partitions: int = 1) -> list[str]:
    """Create or reset the game's users on the server of ``admin`` (a client allowed ``ACL``); the
    users set. Call on each node of a cluster."""
    done = []
    with translate_errors():
        for role in ROLES:
            rule = rules(role, tag, partitions)
            await admin.execute_command("ACL", "SETUSER", rule.user, *rule.setuser_args(passwords[role]))
            done.append(rule.user)
    return done


async def load_scripts(client: Any, libraries: tuple[Library, ...] = (ECHOMQ, LIBRARY)) -> int:
    """Load into the server's script cache each script of ``libraries`` it lacks (``SCRIPT EXISTS``,
    then ``SCRIPT LOAD``); how many were loaded. For a user that may (not the host)."""
    sources = [library.source(name) for library in libraries for name in library.counts]
    shas = [hashlib.sha1(text.encode()).hexdigest() for text in sources]  # noqa: S324  (Redis's name)
    with translate_errors():
        present = await client.script_exists(*shas)
        missing = [text for text, there in zip(sources, present, strict=True) if not there]
        for text in missing:
            await client.script_load(text)
    return len(missing)


async def move_legacy_secrets(client: Any, tag: str) -> int:
    """Move the secrets an earlier version kept under ``cmx:{t}:secret:<RND>`` (inside the host's key
    patterns) to ``cmxs:{t}:secret:<RND>``; how many moved. ``serve`` runs it at its start, as admin."""
    keys, moved = GameKeys(tag), 0
    with translate_errors():
        async for raw in client.scan_iter(match=f"{keys.prefix}secret:*", count=1000):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            await client.rename(name, keys.secret(name.rsplit(":", 1)[1]))
            moved += 1
    return moved


def with_user(url: str, user: str, password: str) -> str:
    """``url`` with ``user:password@`` in it (replacing any)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


HOST_URL_ENV = "CODEMOJEX_HOST_URL"
WORKER_URL_ENV = "CODEMOJEX_WORKER_URL"


@dataclass(frozen=True, slots=True)
class Credentials:
    """The Redis URL (with its user and password) of serve itself, of the web host and of the worker."""

    admin: str
    host: str
    worker: str

    @property
    def least_privilege(self) -> bool:
        """The host has a user of its own: it may not touch secrets, the worker opens and closes."""
        return self.host != self.admin

    @classmethod
    def embedded(cls, url: str, tag: str, passwords: dict[str, str]) -> Credentials:
        def login(role: str) -> str:
            return with_user(url, user_name(role, tag), passwords[role])

        return cls(login(ADMIN), login(HOST), login(WORKER))

    @classmethod
    def from_env(cls, url: str) -> Credentials:
        return cls(url, os.environ.get(HOST_URL_ENV) or url, os.environ.get(WORKER_URL_ENV) or url)


def write_private(path: Path, text: str) -> None:
    """Put ``text`` in ``path``, readable by its owner alone (0600), never through a symlink: it is
    written to a fresh file beside ``path`` (``O_EXCL | O_NOFOLLOW``) which then replaces ``path``, so
    a link planted at ``path`` is replaced, its target untouched; a reader sees the old text or the new,
    never half of it."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(text)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_passwords(path: Path, passwords: Mapping[str, str]) -> None:
    """Keep ``passwords`` (role -> password) in ``path``, readable by its owner alone (0600; see
    :func:`write_private`)."""
    write_private(path, json.dumps(dict(passwords), indent=2, sort_keys=True) + "\n")


def read_passwords(path: Path) -> dict[str, str]:
    """The passwords kept in ``path`` (see :func:`write_passwords`)."""
    loaded: dict[str, str] = json.loads(path.read_text())
    return loaded


def passwords_at(path: Path) -> dict[str, str]:
    """The passwords in ``path``, made (and kept there, 0600) on the first call; a role missing from
    the file gets one. A symlink at ``path`` is not read (whoever planted it would know the passwords)
    but replaced."""
    kept = read_passwords(path) if path.exists() and not path.is_symlink() else {}
    wanted = new_passwords()
    merged = {role: kept.get(role) or wanted[role] for role in wanted}
    if merged != kept:
        write_passwords(path, merged)
    return merged
