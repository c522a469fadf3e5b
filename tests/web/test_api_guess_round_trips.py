"""The player's path costs one Redis round trip: a guess POST is one EVALSHA from the host, whatever the
rate limits, the token, the round and the locks (counted with MONITOR on a redis-server of the test's
own, so no other test's commands are seen); and what that one call admits is what the slow path would.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from codemojex.guesses import request_digest
from codemojex.keys import GameKeys
from codemojex.payload import encode_payload
from echomq import rows
from echomq.keyspace import Keyspace
from tests.support.web import FRUIT, OPERATOR, Served, open_round

MARKER = "end-of-the-counted-request"
HANDSHAKE = {"HELLO", "CLIENT", "AUTH", "SELECT"}


@pytest.fixture
def own_host(fresh_server, serve_app, host_config, tag) -> Served:
    """The app on a redis-server of this test's own (nothing else talks to it), its sampler quiet."""
    config = dataclasses.replace(
        host_config, redis_url=fresh_server.url, proof=False, proof_crash=False, sample_every_s=3600
    )
    served: Served = serve_app(config)
    return served


@pytest.fixture
def counted(fresh_server) -> Iterator[Callable[[Callable[[], Any]], list[list[str]]]]:
    """``counted(action)``: the commands clients (not scripts) sent Redis while ``action`` ran."""
    client = redis.Redis.from_url(fresh_server.url)

    def count(action: Callable[[], Any]) -> list[list[str]]:
        seen: list[dict[str, Any]] = []
        with client.monitor() as monitor:
            ready = threading.Event()

            def listen() -> None:
                ready.set()
                while True:
                    command = monitor.next_command()
                    if MARKER in command["command"]:
                        return
                    seen.append(command)

            thread = threading.Thread(target=listen, daemon=True)
            thread.start()
            ready.wait()
            action()
            client.echo(MARKER)
            thread.join(10)
        # a new pooled connection's handshake is the connection's, not the request's
        sent = [c["command"].split() for c in seen if c["client_type"] != "lua"]
        return [command for command in sent if command[0].upper() not in HANDSHAKE]

    yield count
    client.close()


def test_a_guess_post_is_one_evalsha(own_host, counted):
    """One guess POST costs exactly one Redis command from the host (once the host has learnt the round
    from its first admitted guess and loaded the script)."""
    with own_host.client(OPERATOR) as operator:
        the_round = open_round(operator)
    with own_host.client() as anon:
        token = anon.post("/api/players", json={"name": "Ada"}).json()["token"]
    path = f"/api/rounds/{the_round['round_id']}/guesses"
    with own_host.client(token) as ada:
        for _ in range(2):  # the round learnt, the script loaded
            assert ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).status_code == 202
        replies = []
        commands = counted(lambda: replies.append(ada.post(path, json={"guess": "🍌🍌🍇🍒🥝🍑"})))
    assert replies[0].status_code == 202, replies[0].text
    assert [command[0].upper() for command in commands] == ["EVALSHA"], commands


def test_a_refused_guess_post_is_one_evalsha(own_host, counted):
    """A guess refused by the game (no funds) or by the token (401) is one Redis command too."""
    with own_host.client(OPERATOR) as operator:
        the_round = open_round(operator)
    with own_host.client() as anon:
        token = anon.post("/api/players", json={"name": "Ada"}).json()["token"]
    path = f"/api/rounds/{the_round['round_id']}/guesses"
    with own_host.client(token) as ada, own_host.client("x" * 43) as nobody:
        for _ in range(2):  # the round learnt, the script loaded
            assert ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).status_code == 202
        replies = []
        commands = counted(lambda: replies.append(nobody.post(path, json={"guess": "🍌🍌🍇🍒🥝🍑"})))
    assert replies[0].status_code == 401
    assert replies[0].headers["www-authenticate"] == "Bearer"
    assert replies[0].json()["error"]["code"] == "unauthorized"
    assert [command[0].upper() for command in commands] == ["EVALSHA"], commands


def test_the_one_call_admits_what_submit_would(served, join, sync_redis, tag):
    """The job the one call admits has submit's payload and request digest, locks overlaid."""
    with served.client(OPERATOR) as operator:
        the_round = open_round(operator)
    round_id = the_round["round_id"]
    ada_id, ada = join("Ada")
    typed = ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑"]
    sync_redis.hset(GameKeys(tag).locks(round_id, ada_id), "2", FRUIT[7])  # a lock, as lock.lua sets it
    reply = ada.post(f"/api/rounds/{round_id}/guesses", json={"guess": typed})
    assert reply.status_code == 202, reply.text
    admitted = ["🍎", "🍌", FRUIT[7], "🍒", "🥝", "🍑"]
    assert reply.json()["guess"] == admitted
    row = rows.decode(sync_redis.hgetall(Keyspace(tag).job(reply.json()["job_id"])))
    assert row["payload"] == encode_payload(round_id, ada_id, admitted)
    # the row keeps the request digest's first 8 bytes (echomq.rows: the admission digest)
    assert row["digest"] == bytes.fromhex(request_digest(round_id, ada_id, typed))[:8]


def test_a_body_nested_past_the_parsers_depth_is_refused_like_any_bad_body(served, join):
    """JSON nested thousands deep (a RecursionError in the parser) is not a plain guess: the routes'
    path refuses it as a bad body (4xx, its buckets charged), never a 500, from a real player's token or
    a made-up one; the host still admits a good guess afterwards."""
    with served.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    body = b'{"guess":' + b"[" * 3000 + b"]" * 3000 + b"}"  # under the body limit
    headers = {"Content-Type": "application/json"}
    with served.client("x" * 40) as stranger:
        for client in (ada, stranger):
            for path in (f"/api/rounds/{round_id}/guesses", "/api/rounds/RND00000000000000000000000/guesses"):
                reply = client.post(path, content=body, headers=headers)
                assert 400 <= reply.status_code < 500, (reply.status_code, reply.text)
    reply = ada.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]})
    assert reply.status_code == 202, reply.text
