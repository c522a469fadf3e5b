"""The core of a bus, below its facade: one tag's keyspace, its scripts and settings, bound to a client.

The operations (:mod:`echomq.jobs`, :mod:`echomq.finish`, :mod:`echomq.lanes`, :mod:`echomq.sweep`,
:mod:`echomq.dead`, :mod:`echomq.stats`) take a :class:`BusCore`; the :class:`~echomq.bus.Bus` facade
is one, with a method for each operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis, RedisCluster

from echomq._validate import check_int
from echomq._wire import async_wire, plain_async
from echomq.durable import DurableWire
from echomq.keyspace import Keyspace
from echomq.scripts import AsyncScripts

DEFAULT_TAG = "cm"


# The largest max_payload: a payload or a result is stored in 64-byte fields of its row, written by one
# HSET whose arguments Lua unpacks (about 8,000 values at most: lua/includes/row.lua), so 3,840 fields.
MAX_PAYLOAD = 240 * 1024
RECENT_MS = 6 * 3600 * 1000  # an admitted id is minted within this (or the dedup window) of the clock


@dataclass(frozen=True, slots=True)
class Settings:
    """Per-bus limits. Every process of one bus should use the same values.

    Windows shorter than a lease are allowed (0 included: tests and short-lived buses use them). A
    finished id is admitted anew once its row is trimmed and its tombstone expired, that is after the
    longer of ``result_ttl_ms`` (``dead_ttl_ms``) and ``dedup_window_ms``, its attempts (the fencing
    token) restarting at 0, while a claim of its old life, or that claim's lost-reply record (kept one
    lease), may still act. Neither can touch the new life: claim.lua replays a job only to the request
    that holds it now, and every finishing call is fenced by the claim's request id as well as its
    token (:mod:`echomq.finish`), so a claim of the earlier life can never finish, fail, extend or
    release the new one. A :class:`~echomq.jobs.Claim` built with ``request=""`` is fenced by its token
    alone and so cannot tell the lives apart: build one only for a job whose id is not reused.
    """

    max_payload: int = 64 * 1024  # bytes, for payloads and results
    wake_cap: int = 64  # wake tokens kept at most: enough to wake that many idle workers at once
    # Retention: finishes and sweeps trim rows past these to tombstones (echomq.finish: "Retention").
    result_ttl_ms: int = 3600 * 1000  # a done row is kept whole this long, then trimmed to a tombstone
    dedup_window_ms: int = 24 * 3600 * 1000  # a finished id absorbs duplicates this long
    dead_ttl_ms: int = 180 * 24 * 3600 * 1000  # a dead row is kept whole this long (as Sidekiq's dead set)
    backoff_base_ms: int = 1000  # first retry delay (before jitter)
    backoff_cap_ms: int = 3600 * 1000  # longest retry delay
    # Durable admission (echomq.durable): acknowledge an enqueue once this many replicas hold it.
    wait_replicas: int = 0  # 0: acknowledged when the master ran it (the default on one server)
    wait_timeout_ms: int = 1000  # how long an admission waits for them before NotDurable

    @property
    def id_span_ms(self) -> int:
        """How far from the producer's clock, before or after, an admitted id may have been minted: the
        dedup window or :data:`RECENT_MS`, the longer (:func:`echomq.jobs.enqueue_call`)."""
        return max(self.dedup_window_ms, RECENT_MS)

    def __post_init__(self) -> None:
        check_int("max_payload", self.max_payload, 1, MAX_PAYLOAD)
        for name in ("wake_cap", "backoff_base_ms", "backoff_cap_ms"):
            check_int(name, getattr(self, name), 1)
        for name in ("result_ttl_ms", "dedup_window_ms", "dead_ttl_ms"):
            check_int(name, getattr(self, name), 0)
        check_int("wait_replicas", self.wait_replicas, 0, 16)
        check_int("wait_timeout_ms", self.wait_timeout_ms, 1, 60_000)


Client = Redis | RedisCluster


class BusCore:
    """What the operations use of a bus: the client, the keyspace of ``tag``, the scripts and the settings.

    ``redis`` is a ``redis.asyncio.Redis`` or a ``redis.asyncio.RedisCluster``, created with
    ``decode_responses=False``.
    """

    def __init__(self, redis: Client, tag: str = DEFAULT_TAG, settings: Settings | None = None) -> None:
        self.redis = redis
        self.keys = Keyspace(tag)
        self.settings = settings or Settings()
        # A plain client's script calls skip redis-py's per-command layers (echomq._wire); the bus holds
        # a connection of its own for them (shared by the buses of one client) until it closes.
        self.wire = async_wire(redis) if plain_async(redis) else None
        self.scripts = AsyncScripts(redis, wire=self.wire)
        self.durable = DurableWire(self) if self.settings.wait_replicas else None

    @property
    def is_cluster(self) -> bool:
        return isinstance(self.redis, RedisCluster)

    @property
    def tag(self) -> str:
        return self.keys.tag


def finish_args(bus: BusCore) -> list[Any]:
    """What a script that calls the finish include's ``complete_job`` (see :mod:`echomq.scripts`) passes
    it after its own arguments, in this order: the bus prefix, the result ttl and the dedup window (ms),
    from ``bus``'s settings."""
    return [bus.keys.prefix, bus.settings.result_ttl_ms, bus.settings.dedup_window_ms]
