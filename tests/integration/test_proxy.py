"""The fault proxy between clients and a real Redis: forwards, cuts (reset and blackhole), restores."""

from __future__ import annotations

import pytest
import redis

from echomq.testing.proxy import Proxy


def test_the_proxy_forwards_cuts_and_restores(redis_server):
    with Proxy(redis_server.port) as proxy:
        client = redis.Redis.from_url(proxy.url, socket_timeout=1, retry_on_timeout=False)
        try:
            assert client.set("proxy:k", "v")
            proxy.cut("reset")
            with pytest.raises(redis.ConnectionError):
                client.get("proxy:k")
            proxy.restore()
            assert client.get("proxy:k") == b"v"  # the client reconnects by itself
            proxy.cut("blackhole")
            with pytest.raises((redis.TimeoutError, redis.ConnectionError)):
                client.get("proxy:k")
            proxy.restore()
            assert client.get("proxy:k") == b"v"
            assert proxy.cuts == 2
        finally:
            client.delete("proxy:k")
            client.close()


def test_a_cut_has_a_known_mode(redis_server):
    with Proxy(redis_server.port) as proxy, pytest.raises(ValueError, match="reset"):
        proxy.cut("unplug")  # type: ignore[arg-type]
