"""The host's admission limits (:class:`Limits`: rates, caps and timeouts, README "Limits"), and whom
they count: the client's address (:func:`client_address`: the peer, or the nearest untrusted hop of a
trusted proxy's ``X-Forwarded-For``) and its key (:func:`limit_key`: an IPv6 address's /64). Enforced by
:mod:`codemojex.web.admission`."""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope

from codemojex.web.buckets import Rate

SIGNUP_PER_ADDRESS = Rate(10, 360_000)  # 10 at once, then one every 6 min (10 an hour)
RECOVER_PER_ADDRESS = Rate(10, 360_000)  # recovery-code sign-ins: 10 at once, then 10 an hour
GUESS_PER_ADDRESS = Rate(60, 100)  # 60 at once, then 10 a second
GUESS_PER_PLAYER = Rate(20, 250)  # 20 at once, then 4 a second
READ_PER_ADDRESS = Rate(300, 20)  # 300 at once, then 50 a second
READ_PER_PLAYER = Rate(120, 50)  # 120 at once, then 20 a second


@dataclass(frozen=True, slots=True)
class Limits:
    """Every admission limit of the host (README "Limits", SECURITY.md "Admission control")."""

    signup_per_address: Rate = SIGNUP_PER_ADDRESS
    recover_per_address: Rate = RECOVER_PER_ADDRESS
    guess_per_address: Rate = GUESS_PER_ADDRESS
    guess_per_player: Rate = GUESS_PER_PLAYER
    read_per_address: Rate = READ_PER_ADDRESS
    read_per_player: Rate = READ_PER_PLAYER
    inflight_per_address: int = 32
    inflight_total: int | None = None  # None: three quarters of HostConfig.max_connections
    queue_timeout_s: float = 10.0  # a request waits this long for a slot under inflight_total
    streams_per_player: int = 3
    streams_per_address: int = 12
    streams_total: int = 1000
    ticket_ttl_s: int = 30  # an event-stream ticket, used once
    stream_send_timeout_s: float = 30.0  # a stream whose client reads nothing for this long is ended
    stream_check_s: float = 5.0  # how often the hub ends streams of closed rounds and revoked tokens
    body_timeout_s: float = 10.0  # a request body must arrive within this
    trusted_proxies: tuple[str, ...] = ()  # addresses / networks whose X-Forwarded-For is believed
    networks: tuple[Any, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("inflight_per_address", "streams_per_player", "streams_per_address", "streams_total"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is at least 1")
        if self.inflight_total is not None and self.inflight_total < 1:
            raise ValueError("inflight_total is at least 1")
        for name in ("queue_timeout_s", "stream_send_timeout_s", "stream_check_s", "body_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} is positive")
        if self.ticket_ttl_s < 1:
            raise ValueError("ticket_ttl_s is at least 1")
        networks = tuple(ipaddress.ip_network(item, strict=False) for item in self.trusted_proxies)
        object.__setattr__(self, "networks", networks)

    def total_for(self, pool_size: int) -> int:
        return self.inflight_total if self.inflight_total is not None else max(1, pool_size * 3 // 4)


def _trusted(address: str, networks: tuple[Any, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None  # a dual-stack socket's
    return any(ip in network or (mapped is not None and mapped in network) for network in networks)


def client_address(scope: Scope, limits: Limits) -> str:
    """The client's address: the peer's, or the nearest untrusted hop of a trusted proxy's header."""
    client = scope.get("client")
    peer = str(client[0]) if client else "unknown"
    if not limits.networks or not _trusted(peer, limits.networks):
        return peer
    forwarded = b",".join(v for k, v in scope["headers"] if k == b"x-forwarded-for").decode("latin-1")
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    address = peer
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            break  # not an address: believe no further
        address = hop
        if not _trusted(hop, limits.networks):
            break
    return address


@functools.lru_cache(maxsize=4096)  # pure, and parsing an address costs more than the lookup
def limit_key(address: str) -> str:
    """Whom the per-address limits count: an IPv6 address's /64 network, an IPv4 address (or an
    IPv4-mapped IPv6 one) itself; anything else (no peer) as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)
