"""The claim and the blocking pickup: how work leaves the lanes.

Guarantees provided here:

* **Exactly one location.** :func:`claim` is one script: the ring rotates (LMOVE), the lane's head is
  popped (ZPOPMIN), the row turns active with attempts + 1, and the id is placed in ``active`` at the
  lease deadline read from the server clock (TIME). No instant exists where the job is in two places or
  none, so a worker that dies after the claim leaves it recoverable: the stalled sweep returns it to its
  lane when the lease passes. That is also why delivery is *at least once* (see :mod:`echomq.finish`).
* **Fair service.** The ring holds each non-empty lane once; every claimed job advances the ring by one
  lane, so with L lanes waiting, a lane's head is served within L claims, however deep the other lanes
  are. A batch claim of N jobs takes N consecutive steps of the same rotation.
* **A lost reply strands nothing.** A claim's reply can be lost after the script ran (a timeout, a
  cut connection, a Redis pause longer than the client's socket timeout): its jobs are then active
  under tokens nobody holds. Every :func:`claim` carries a request id (a fresh one unless the caller
  passes its own), and the script records what that request claimed for one lease. A retry with the
  same request id, whether redis-py's own retry of the command or the caller's retry after
  :class:`~echomq.errors.RedisUnavailable`, is answered with the same jobs, same tokens, leases renewed,
  instead of claiming others: no try is spent for the lost reply and no job waits out a lease. The
  worker's fetcher retries its claim with the same request id until an answer arrives. A retry later
  than one lease gets only the jobs still active under their tokens (the others were swept back), and
  only those its own request still holds: the row names the request that claimed it, so a job whose id
  was finished, trimmed and admitted anew (windows shorter than a lease) and is held by another claim
  under the same restarted token is never handed to the retry.
  While the bus's slot is resharded on a Redis Cluster, a claim whose record would be on the other
  node keeps none (``unrecorded``): its lost reply strands its jobs for one lease, then the stalled
  sweep returns them.
* **Idle is cheap.** Blocking happens outside Lua, claiming inside it: an idle worker blocks on the
  ``wake`` list (BLPOP) with its claim sent behind the BLPOP on the same connection, so the claim runs
  the moment a token arrives (or the block times out). Every script that makes a job claimable pushes
  a token (the list is capped), and a claim that leaves the ring empty deletes the stale tokens; an
  empty claim runs eight commands (the call and seven inside it). See :mod:`echomq.worker.fetcher`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq._validate import check_int, check_utf8
from echomq.errors import InvalidOption, translate_redis_errors
from echomq.jobs import MAX_LEASE_MS, Claim, claims_from_reply
from echomq.keyspace import check_request

if TYPE_CHECKING:
    from echomq.core import BusCore

MAX_BATCH = 1000
_OWNER_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Claimed:
    """One claim call's answer: the jobs, the server time, and the next delayed job's due time; a claim
    that got nothing (not a retry) also read the earliest lease deadline in ``active`` (``leases_read``;
    ``next_lease_ms`` None when active is empty)."""

    jobs: list[Claim]
    server_ms: int
    next_due_ms: int | None
    leases_read: bool = False
    next_lease_ms: int | None = None


def _check_owner(owner: object) -> None:
    if not isinstance(owner, str) or len(owner) > _OWNER_LIMIT:
        raise InvalidOption(f"owner is a str of at most {_OWNER_LIMIT} characters")
    check_utf8("owner", owner)


def new_request() -> str:
    """A fresh claim request id (random, so no two claims share one)."""
    return secrets.token_hex(12)


def claim_call(
    bus: BusCore, count: int, lease_ms: int, owner: str, request: str = ""
) -> tuple[list[str], list[Any]]:
    """Keys and args of one claim.lua call, every input checked (shared with the benchmark). An empty
    ``request`` records nothing: a lost reply then strands its jobs for a lease (the benchmark's raw
    claims, which reuse one call's arguments, must not replay each other). The record key
    (:meth:`~echomq.keyspace.Keyspace.claim_record`) is built by the script, not declared: it is absent
    until the claim runs, and an absent declared key makes Redis refuse the whole script while the
    slot is resharded. Mid-reshard a claim whose record is on no node or the other one records nothing
    (counted as ``unrecorded``): its lost reply strands its jobs for a lease, as with no request id."""
    check_request(request)
    check_int("count", count, 1, MAX_BATCH)
    check_int("lease_ms", lease_ms, 1, MAX_LEASE_MS)
    _check_owner(owner)
    keys = bus.keys
    return (
        [
            keys.ring,
            keys.active,
            keys.delayed,
            keys.wake,
            keys.stats,
            keys.waiting,
        ],
        [keys.prefix, lease_ms, count, owner, request],
    )


def claimed_from_reply(reply: Any, request: str) -> Claimed:
    """Read the reply of claim.lua called with ``request`` (each :class:`Claim` carries it)."""
    next_due = int(reply[1])
    claims = claims_from_reply(reply, request)
    due = None if next_due < 0 else next_due
    if claims or len(reply) < 4:
        return Claimed(claims, int(reply[0]), due)
    lease = int(reply[3])
    return Claimed(claims, int(reply[0]), due, leases_read=True, next_lease_ms=None if lease < 0 else lease)


async def claim(
    bus: BusCore, count: int = 1, lease_ms: int = 30_000, owner: str = "", request: str | None = None
) -> Claimed:
    """Claim up to ``count`` jobs, one lane per ring step, each leased for ``lease_ms``.

    ``request`` (default: a fresh id) names this claim: a call with the request id of an earlier claim
    within its lease answers with that claim's jobs still active under their tokens and held by this
    request (the row names it), leases renewed, and claims nothing new. Lost reply: the jobs are active
    under this request; retry with the same ``request`` (and get them) after
    :class:`~echomq.errors.RedisUnavailable`.
    """
    request = new_request() if request is None else request
    keys, args = claim_call(bus, count, lease_ms, owner, request)
    with translate_redis_errors():
        reply = await bus.scripts.run("claim", keys, args)
    return claimed_from_reply(reply, request)


async def wait_for_work(bus: BusCore, timeout_s: object) -> bool:
    """Block on the wake list for up to ``timeout_s`` seconds; True if a token arrived.

    The client's ``socket_timeout`` must be None or longer than ``timeout_s`` (redis-py's default is
    5 s): a longer block is refused with :class:`InvalidOption` rather than failing as a timeout.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not 0 < timeout_s <= 3600:
        raise InvalidOption(f"timeout_s is in (0, 3600], got {timeout_s!r}")
    pool = getattr(bus.redis, "connection_pool", None)  # a cluster client has one pool per node
    kwargs = pool.connection_kwargs if pool is not None else bus.redis.get_connection_kwargs()
    socket_timeout = kwargs.get("socket_timeout")
    if socket_timeout is not None and timeout_s >= socket_timeout:
        raise InvalidOption(
            f"timeout_s={timeout_s} needs a client whose socket_timeout is None or longer "
            f"(it is {socket_timeout})"
        )
    with translate_redis_errors():
        got = await bus.redis.blpop([bus.keys.wake], timeout=round(timeout_s, 3))
    return got is not None
