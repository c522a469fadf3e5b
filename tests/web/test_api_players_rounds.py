"""Players, rounds, the wallet, the schema and the error shape, over real HTTP."""

from __future__ import annotations

import dataclasses
import json

import pytest

from codemojex.keys import GameKeys
from echomq.testing.server import RedisProcess
from tests.support.web import FRUIT, OPERATOR, error_code, open_round


def test_joining_gives_a_player_id_and_a_token_shown_once(served, anon, sync_redis, tag):
    reply = anon.post("/api/players", json={"name": "  Ada 👩‍💻 "})
    assert reply.status_code == 201
    body = reply.json()
    assert body["player_id"].startswith("PLR")
    assert body["name"] == "Ada 👩‍💻"
    assert len(body["token"]) >= 40
    stored = {key: sync_redis.get(key) for key in sync_redis.scan_iter(f"cmx:{{{tag}}}:token:*")}
    assert list(stored.values()) == [body["player_id"].encode()]
    assert not any(body["token"].encode() in key for key in stored)  # only its SHA-256 is kept
    with served.client(body["token"]) as ada:
        assert ada.get("/api/me").json()["player_id"] == body["player_id"]
        assert ada.get("/api/wallet").json()["balances"] == {}  # no grant: the first guess of a round tops up


@pytest.mark.parametrize("name", ["", "   ", "a" * 33, "bell\x07", "line\nbreak"])
def test_a_bad_name_is_400_and_registers_nobody(anon, sync_redis, tag, name):
    reply = anon.post("/api/players", json={"name": name})
    assert reply.status_code == 400
    assert error_code(reply) == "invalid_name"
    assert sync_redis.zcard(f"cmx:{{{tag}}}:players") == 0


@pytest.mark.parametrize(
    "name", ["\u3164", "\u2800 \u2800", "\u200b", "\ufe0f", "Z\u0335\u0321\u0322algo", "\U000f0000"]
)
def test_an_invisible_or_zalgo_name_is_400_and_registers_nobody(anon, sync_redis, tag, name):
    reply = anon.post("/api/players", json={"name": name})
    assert reply.status_code == 400
    assert error_code(reply) == "invalid_name"
    assert sync_redis.zcard(f"cmx:{{{tag}}}:players") == 0


@pytest.mark.parametrize("escaped", ["\\ud800", "Ada\\udfff", "\\udc00\\ud800"])
def test_a_lone_surrogate_in_a_name_is_422_and_registers_nobody(anon, sync_redis, tag, escaped):
    """JSON may carry a lone surrogate as an escape: the body is refused as malformed, never a 500 (and
    codemojex.names refuses one that reaches it as InvalidName)."""
    reply = anon.post(
        "/api/players",
        content=f'{{"name": "{escaped}"}}'.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert (reply.status_code, error_code(reply)) == (422, "malformed_body")
    assert sync_redis.zcard(f"cmx:{{{tag}}}:players") == 0


def test_a_name_that_looks_like_another_players_is_409_name_taken(anon, sync_redis, tag):
    first = anon.post("/api/players", json={"name": "Bob"})
    assert first.status_code == 201
    for look_alike in ["bob", "B0B", "B\u043eb", "\uff22\uff4f\uff42"]:
        reply = anon.post("/api/players", json={"name": look_alike})
        assert reply.status_code == 409
        assert error_code(reply) == "name_taken"
        assert reply.json()["error"]["message"]
    assert sync_redis.zcard(f"cmx:{{{tag}}}:players") == 1
    assert [sync_redis.get(key) for key in sync_redis.scan_iter(f"cmx:{{{tag}}}:token:*")] == [
        first.json()["player_id"].encode()
    ]
    assert sync_redis.hgetall(f"cmx:{{{tag}}}:names") == {b"bob": first.json()["player_id"].encode()}


@pytest.mark.parametrize("body", [{}, {"name": 5}, {"name": "Ada", "admin": True}, [], "Ada"])
def test_a_malformed_join_is_422(anon, body):
    reply = anon.post("/api/players", json=body)
    assert reply.status_code == 422
    assert error_code(reply) == "malformed_body"


def test_every_player_route_needs_a_token(anon, operator):
    the_round = open_round(operator)
    rid = the_round["round_id"]
    for method, path in [
        ("GET", "/api/me"),
        ("GET", "/api/wallet"),
        ("GET", f"/api/rounds/{rid}/guesses"),
        ("PUT", f"/api/rounds/{rid}/locks/0"),
        ("DELETE", f"/api/rounds/{rid}/locks/0"),
        ("GET", "/api/jobs/JOB00000000000000000000000"),
        ("GET", f"/api/events?round_id={rid}"),
    ]:
        reply = anon.request(method, path)
        assert reply.status_code == 401, (method, path)
        assert error_code(reply) == "unauthorized"


def test_with_no_round_open_the_current_round_is_404(anon):
    reply = anon.get("/api/rounds/current")
    assert reply.status_code == 404
    assert error_code(reply) == "no_open_round"


def test_a_round_shows_its_keyboard_prices_and_times_but_not_its_secret(anon, operator):
    opened = open_round(operator, prices=[{"currency": "coin", "amount": 2}], max_guesses=7)
    for path in ("/api/rounds/current", f"/api/rounds/{opened['round_id']}"):
        shown = anon.get(path).json()
        assert shown["round_id"] == opened["round_id"]
        assert shown["keyboard"] == FRUIT
        assert shown["length"] == 6
        assert shown["prices"] == [{"currency": "coin", "amount": 2}]
        assert shown["status"] == "open"
        assert shown["max_guesses"] == 7
        assert shown["opens_ms"] <= shown["server_ms"]
        assert shown["secret"] is None
    assert [r["round_id"] for r in anon.get("/api/rounds").json()["rounds"]] == [opened["round_id"]]


def test_a_closed_round_reveals_its_secret(anon, operator, sync_redis, tag):
    opened = open_round(operator)
    operator.post(f"/api/operator/rounds/{opened['round_id']}/close")
    shown = anon.get(f"/api/rounds/{opened['round_id']}").json()
    assert shown["status"] == "closed"
    assert shown["secret"] is not None
    assert len(shown["secret"]) == 6
    assert set(shown["secret"]) <= set(FRUIT)
    assert shown["secret"] == json.loads(sync_redis.get(GameKeys(tag).secret(opened["round_id"])))
    assert error_code(anon.get("/api/rounds/current")) == "no_open_round"
    [listed] = anon.get("/api/rounds").json()["rounds"]
    assert listed["secret"] == shown["secret"]


def test_unknown_and_ill_formed_rounds(anon):
    assert error_code(anon.get("/api/rounds/RND00000000000000000000000")) == "unknown_round"
    assert anon.get("/api/rounds/RND00000000000000000000000").status_code == 404
    bad = anon.get("/api/rounds/PLR00000000000000000000000")
    assert (bad.status_code, error_code(bad)) == (400, "invalid_id")
    assert anon.get("/api/rounds?limit=0").status_code == 422


def test_an_unknown_path_is_a_json_404(anon):
    reply = anon.get("/api/nothing-here")
    assert reply.status_code == 404
    assert error_code(reply) == "not_found"


def test_the_openapi_schema_names_every_route(anon):
    schema = anon.get("/openapi.json").json()
    paths = set(schema["paths"])
    assert {
        "/api/players",
        "/api/rounds/current",
        "/api/rounds/{round_id}",
        "/api/rounds/{round_id}/guesses",
        "/api/jobs/{job_id}",
        "/api/rounds/{round_id}/leaderboard",
        "/api/wallet",
        "/api/events",
        "/api/operator/rounds",
        "/api/operator/dead/{job_id}/retry",
        "/metrics",
    } <= paths
    assert "Idempotency-Key" in str(schema["paths"]["/api/rounds/{round_id}/guesses"]["post"]["parameters"])


def test_the_pages_are_served(anon):
    """Each page is its own template on the shared base: its script, and its nav link marked current."""
    pages = (
        ("/", "play.js"),
        ("/history", "history.js"),
        ("/proof", "proof.js"),
        ("/dashboard", "dashboard.js"),
    )
    for path, marker in pages:
        reply = anon.get(path)
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/html")
        assert reply.headers["cache-control"] == "no-cache"
        assert marker in reply.text
        assert reply.text.count('aria-current="page"') == 1
        assert f'<a href="{path}" aria-current="page"' in reply.text
    script = anon.get("/static/play.js")
    assert script.status_code == 200
    assert script.headers["cache-control"] == "no-cache"


def test_with_redis_down_a_call_is_503_unavailable(serve_app, host_config):
    """The host stays up and says so; the effect of a call in flight is unknown, so the client retries."""
    server = RedisProcess(appendonly=True, appendfsync="always").start()
    try:
        served = serve_app(dataclasses.replace(host_config, redis_url=server.url))
        with served.client(OPERATOR) as operator:
            open_round(operator)
            server.kill()
            reply = operator.get("/api/rounds/current")
            assert reply.status_code == 503
            assert error_code(reply) == "unavailable"
            server.start()
            assert operator.get("/api/rounds/current").status_code == 200
    finally:
        server.close()
