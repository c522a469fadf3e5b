"""Attacks on the per-address limits from a client that holds many addresses (issue 12, adversary).

An IPv6 host is routinely given a whole /64 (2**64 addresses): counted one address each, a single
client would sign up without limit (farming starting grants) and spread any flood over fresh buckets.
Clients are simulated as in ``test_api_admission``: 127.0.0.1 is the trusted proxy and each client's
address is named in ``X-Forwarded-For``.
"""

from __future__ import annotations

import dataclasses

from codemojex.web import admission
from codemojex.web.admission import Limits, client_address
from codemojex.web.buckets import Rate
from tests.support.web import error_code

PROXIED = ("127.0.0.1",)


def join_from(served, address: str, name: str):
    with served.client() as client:
        return client.post("/api/players", json={"name": name}, headers={"X-Forwarded-For": address})


def test_signup_farming_from_one_ipv6_slash64_is_one_address(serve_app, host_config):
    limits = Limits(trusted_proxies=PROXIED, signup_per_address=Rate(3, 3_600_000))
    served = serve_app(dataclasses.replace(host_config, limits=limits))
    replies = [join_from(served, f"2001:db8:1:2::{n:x}", f"Farm {n}") for n in range(1, 6)]
    assert [r.status_code for r in replies] == [201, 201, 201, 429, 429]
    assert error_code(replies[-1]) == "rate_limited"
    # another /64 (another client) is not held back by the first one's use
    assert join_from(served, "2001:db8:1:3::1", "Neighbour").status_code == 201
    # an IPv4-mapped IPv6 address is the IPv4 client it names
    for n in range(3):
        assert join_from(served, "198.51.100.9", f"Four {n}").status_code == 201
    assert join_from(served, "::ffff:198.51.100.9", "Mapped").status_code == 429


def test_limit_key_groups_ipv6_by_slash64_and_keeps_ipv4_and_names():
    limit_key = admission.limit_key
    assert limit_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert limit_key("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64"
    assert limit_key("2001:db8:1:3::1") != limit_key("2001:db8:1:2::1")
    assert limit_key("198.51.100.9") == "198.51.100.9"
    assert limit_key("::ffff:198.51.100.9") == "198.51.100.9"
    assert limit_key("unknown") == "unknown"  # not an address (no peer): kept as is
    scope = {"client": ("2001:db8:1:2::99", 4), "headers": []}
    assert client_address(scope, Limits()) == "2001:db8:1:2::99"  # the address itself is unchanged


def test_a_trusted_proxy_reaching_a_dual_stack_socket_is_still_trusted():
    """A host bound to ``::`` sees an IPv4 proxy as ``::ffff:a.b.c.d``: were it not matched against
    ``trusted_proxies``, every client behind the proxy would share the proxy's one set of limits."""
    limits = Limits(trusted_proxies=("127.0.0.1",))
    scope = {"client": ("::ffff:127.0.0.1", 4), "headers": [(b"x-forwarded-for", b"198.51.100.7")]}
    assert client_address(scope, limits) == "198.51.100.7"
    hops = b"198.51.100.7, ::ffff:127.0.0.1"  # a mapped trusted hop is skipped too
    assert client_address({**scope, "headers": [(b"x-forwarded-for", hops)]}, limits) == "198.51.100.7"
