"""Admission control against a real host and a real Redis: each attack of issue 12 turned into a test.

Clients all come from 127.0.0.1 here; a test that needs several addresses trusts 127.0.0.1 as its proxy
(``Limits.trusted_proxies``) and names each client's address in ``X-Forwarded-For``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import socket

import httpx

from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import OPERATOR, error_code, open_round, wait_until

PROXIED = ("127.0.0.1",)


def limited(config, **limits):
    return dataclasses.replace(config, limits=Limits(**limits))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def join_from(served, address: str, name: str) -> httpx.Response:
    with served.client() as client:
        return client.post("/api/players", json={"name": name}, headers={"X-Forwarded-For": address})


async def _burst(url: str, count: int, attacker: str, player_token: str, player_calls: int):
    """``count`` concurrent anonymous reads from ``attacker`` and, among them, a player's own calls."""
    limits = httpx.Limits(max_connections=count + player_calls, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        anonymous = [client.get("/api/rounds", headers={"X-Forwarded-For": attacker}) for _ in range(count)]
        mine = {"Authorization": f"Bearer {player_token}", "X-Forwarded-For": "198.51.100.2"}
        own = [client.get("/api/wallet", headers=mine) for _ in range(player_calls)]
        replies = await asyncio.gather(*anonymous, *own)
    return [r.status_code for r in replies[:count]], [r.status_code for r in replies[count:]]


def test_a_burst_of_anonymous_reads_leaves_other_players_served(serve_app, host_config):
    served = serve_app(dataclasses.replace(limited(host_config, trusted_proxies=PROXIED), max_connections=20))
    player = join_from(served, "198.51.100.2", "Ada").json()
    burst, own = asyncio.run(_burst(served.url, 150, "203.0.113.7", player["token"], 10))
    assert set(burst) <= {200, 429}
    assert 429 in burst
    assert own == [200] * 10  # and the player beside it is served


def test_one_address_cannot_exhaust_the_pool_even_under_its_own_cap(serve_app, host_config):
    config = limited(host_config, trusted_proxies=PROXIED, inflight_per_address=1000)
    served = serve_app(dataclasses.replace(config, max_connections=20))  # 15 requests in flight at most
    player = join_from(served, "198.51.100.2", "Ada").json()
    burst, own = asyncio.run(_burst(served.url, 150, "203.0.113.7", player["token"], 10))
    assert set(burst) == {200}  # they waited for a slot instead of failing for want of a connection
    assert own == [200] * 10


def test_a_signup_flood_gets_429_with_retry_after_and_leaves_no_lasting_keys(
    serve_app, host_config, sync_redis, tag
):
    served = serve_app(limited(host_config, trusted_proxies=PROXIED, signup_per_address=Rate(3, 3_600_000)))
    codes = [join_from(served, "203.0.113.7", f"Bot{n}").status_code for n in range(5)]
    assert codes == [201, 201, 201, 429, 429]
    refused = join_from(served, "203.0.113.7", "Bot9")
    assert error_code(refused) == "rate_limited"
    assert 1 <= int(refused.headers["retry-after"]) <= 3600  # the next token (one an hour), in s
    assert refused.json()["error"]["status"] == 429
    assert join_from(served, "198.51.100.2", "Ada").status_code == 201  # another address is not held
    buckets = list(sync_redis.scan_iter(f"cmx:{{{tag}}}:bucket:*"))
    assert buckets
    assert all(sync_redis.pttl(key) > 0 for key in buckets)


def test_forwarded_for_is_believed_only_from_a_trusted_proxy(serve_app, host_config):
    served = serve_app(limited(host_config, signup_per_address=Rate(2, 3_600_000)))  # trusts nobody
    codes = [join_from(served, f"203.0.113.{n}", f"Bot{n}").status_code for n in range(3)]
    assert codes == [201, 201, 429]  # one peer, whatever the header says


def test_a_player_is_limited_across_addresses(serve_app, host_config):
    served = serve_app(limited(host_config, trusted_proxies=PROXIED, guess_per_player=Rate(2, 3_600_000)))
    ada = join_from(served, "198.51.100.2", "Ada").json()
    with served.client(OPERATOR) as operator:
        rid = open_round(operator)["round_id"]
    with served.client(ada["token"]) as client:
        codes = [
            client.post(
                f"/api/rounds/{rid}/guesses",
                json={"guess": "🍎🍌🍇🍒🥝🍑"},
                headers={"X-Forwarded-For": f"203.0.113.{n}"},
            ).status_code
            for n in range(3)
        ]
        assert codes == [202, 202, 429]
        assert client.get("/api/me").status_code == 200  # reads have their own bucket


def test_a_broken_limiter_lets_reads_through_and_refuses_signups(serve_app, host_config, sync_redis, tag):
    served = serve_app(host_config)
    for kind in ("read", "signup"):  # a bucket key of the wrong type: the script fails on it
        sync_redis.hset(f"cmx:{{{tag}}}:bucket:{kind}:a:{sha('127.0.0.1')}", "x", "1")
    with served.client() as anon:
        assert anon.get("/api/rounds").status_code == 200  # reads fail open
        refused = anon.post("/api/players", json={"name": "Ada"})
    assert (refused.status_code, error_code(refused)) == (503, "unavailable")  # sign-ups fail closed
    assert "retry-after" in refused.headers


def test_a_slow_body_upload_is_cut_off_with_408(serve_app, host_config):
    served = serve_app(limited(host_config, body_timeout_s=0.3))
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(
            b"POST /api/players HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
            b"Content-Length: 40\r\n\r\n{"
        )  # then nothing more
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"request_timeout" in answer or b"content-length" in answer.lower()


def test_requests_in_flight_per_address_are_capped(serve_app, host_config):
    config = limited(host_config, trusted_proxies=PROXIED, inflight_per_address=4, body_timeout_s=30)
    served = serve_app(config)
    held = []
    try:
        for _ in range(4):  # four uploads that never finish hold the address's four slots
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=30)
            sock.sendall(
                b"POST /api/players HTTP/1.1\r\nHost: test\r\nX-Forwarded-For: 203.0.113.7\r\n"
                b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{"
            )
            held.append(sock)

        def refused() -> bool:
            with served.client() as client:
                reply = client.get("/api/rounds", headers={"X-Forwarded-For": "203.0.113.7"})
            return reply.status_code == 429 and error_code(reply) == "too_many_requests"

        wait_until(refused, what="the fifth request refused")
        with served.client() as client:
            assert client.get("/api/rounds", headers={"X-Forwarded-For": "198.51.100.2"}).status_code == 200
    finally:
        for sock in held:
            sock.close()
