"""The worker's check of the Redis it runs on: ``maxmemory-policy`` must be ``noeviction``, else eviction
can drop leases and jobs (a warning, ``redis.eviction_policy``; the worker runs on)."""

from __future__ import annotations

import logging
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from echomq.errors import RedisUnavailable, translated
from echomq.partitions import AnyBus
from echomq.worker.logs import emit

log = logging.getLogger("echomq.worker")


async def check_eviction_policy(bus: AnyBus) -> bool:
    """Warn if ``bus``'s Redis may evict keys; True when Redis could not be reached, to check again later.

    A server where CONFIG is renamed, disabled or denied is not checked (logged at DEBUG)."""
    try:
        reply: dict[Any, Any] = await bus.redis.config_get("maxmemory-policy")
    except (redis.RedisError, RedisClusterException) as exc:  # CONFIG renamed, disabled or denied
        emit(log, logging.DEBUG, "redis.config_unavailable", error=str(exc) or type(exc).__name__)
        # Unreachable (a worker started before its Redis): check again once the loop gets through.
        return isinstance(translated(exc), RedisUnavailable)
    for key, value in reply.items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        policy = value.decode() if isinstance(value, bytes) else str(value)
        if name == "maxmemory-policy" and policy != "noeviction":
            emit(
                log,
                logging.WARNING,
                "redis.eviction_policy",
                policy=policy,
                advice="set maxmemory-policy noeviction: eviction can drop leases and jobs",
            )
    return False
