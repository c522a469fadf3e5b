"""Slow request bodies against a real host (issue 12, adversary).

A request waiting for its body uses no Redis connection, yet used to hold one of the host's in-flight
slots (``inflight_total``, sized to the Redis pool) for up to ``body_timeout_s``: a few addresses, each
under its own in-flight cap, that open bodies they never finish held every slot, and every other client
waited ``queue_timeout_s`` for a 503 ``busy``. A request now takes its slot once its body has arrived.
"""

from __future__ import annotations

import dataclasses
import socket

from codemojex.web.admission import Limits
from tests.support.web import wait_until

PROXIED = ("127.0.0.1",)


def _slow_body(port: int, address: str) -> socket.socket:
    """A sign-up whose declared body never arrives (its first byte only)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /api/players HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"X-Forwarded-For: {address}\r\nContent-Length: 200\r\n\r\n{{".encode()
    )
    return sock


def test_slow_bodies_from_a_few_addresses_do_not_hold_every_slot(serve_app, host_config):
    limits = Limits(trusted_proxies=PROXIED, inflight_per_address=5, queue_timeout_s=1.0, body_timeout_s=30.0)
    served = serve_app(dataclasses.replace(host_config, limits=limits, max_connections=8))  # 6 slots
    held = [_slow_body(served.port, f"203.0.113.{n // 5}") for n in range(15)]  # 3 addresses x 5
    try:
        with served.client() as client:

            def capped(address: str) -> bool:  # its 5 slow requests are in: the address is at its cap
                reply = client.get("/api/rounds", headers={"X-Forwarded-For": address})
                return reply.status_code == 429

            for n in range(3):
                wait_until(lambda n=n: capped(f"203.0.113.{n}"), what="the slow requests in flight")
            other = {"X-Forwarded-For": "198.51.100.2"}
            replies = [client.get("/api/rounds", headers=other) for _ in range(3)]
        assert [reply.status_code for reply in replies] == [200] * 3, [r.text for r in replies]
    finally:
        for sock in held:
            sock.close()
