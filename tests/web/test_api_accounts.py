"""Accounts and tokens over real HTTP: an expired, rotated or revoked token is 401; a rotation whose reply
was lost is retried safely; a taken name comes with a free one; a sign-up flood leaves no keys."""

from __future__ import annotations

import dataclasses

from codemojex import trials
from codemojex.game import Game, GameSettings
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from echomq import Bus
from tests.support.web import (
    FRUIT,
    error_code,
    open_round,
    run,
    stop_worker,
    wait_until,
    with_settings,
    worker_process,
)


def token_keys(sync_redis, tag: str) -> list[bytes]:
    return list(sync_redis.scan_iter(f"cmx:{{{tag}}}:token:*"))


def test_an_expired_token_is_401(serve_app, host_config, sync_redis, tag):
    served = serve_app(with_settings(host_config, token_lifetime_ms=400))
    with served.client() as anon:
        body = anon.post("/api/players", json={"name": "Ada"}).json()
    assert body["token_expires_ms"] == body["created_ms"] + 400
    with served.client(body["token"]) as ada:
        assert ada.get("/api/me").status_code == 200
        wait_until(lambda: not token_keys(sync_redis, tag), timeout=10, what="the token's key to expire")
        reply = ada.get("/api/me")
        assert (reply.status_code, error_code(reply)) == (401, "unauthorized")
        assert ada.post("/api/me/token").status_code == 401  # an expired token cannot be rotated


def test_a_rotated_token_is_401_and_the_new_one_works(served, join):
    ada_id, ada = join("Ada")
    old = ada.headers["Authorization"]
    reply = ada.post("/api/me/token")
    assert reply.status_code == 200
    body = reply.json()
    assert body["player_id"] == ada_id
    assert body["token_expires_ms"] > 0
    assert ada.get("/api/me").status_code == 401
    with served.client(body["token"]) as renewed:
        assert renewed.get("/api/me").json()["player_id"] == ada_id
        assert renewed.get("/api/wallet").json()["balances"] == {}  # no grant at sign-up (the economy)
    assert old == ada.headers["Authorization"]


def test_a_rotation_retried_after_a_lost_reply_gets_the_same_token(served, join):
    ada_id, ada = join("Ada")
    first = ada.post("/api/me/token")
    again = ada.post("/api/me/token")  # the first reply was lost: the client sends it again
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["token"] == first.json()["token"]
    with served.client(first.json()["token"]) as renewed:
        assert renewed.get("/api/me").json()["player_id"] == ada_id
    assert ada.get("/api/me").status_code == 401


def test_logout_revokes_the_token(served, join):
    ada_id, ada = join("Ada")
    reply = ada.delete("/api/me/token")
    assert reply.status_code == 200
    assert reply.json() == {"player_id": ada_id, "revoked": True}
    for method, path in [("GET", "/api/me"), ("GET", "/api/wallet"), ("DELETE", "/api/me/token")]:
        refused = ada.request(method, path)
        assert (refused.status_code, error_code(refused)) == (401, "unauthorized"), path
    assert ada.post("/api/me/token").status_code == 401  # nor rotated afterwards


def test_token_routes_without_a_token_are_401(anon):
    for method in ("POST", "DELETE"):
        reply = anon.request(method, "/api/me/token")
        assert (reply.status_code, error_code(reply)) == (401, "unauthorized")
        assert reply.headers["WWW-Authenticate"] == "Bearer"


def test_a_taken_name_is_409_with_a_free_suggestion(anon):
    assert anon.post("/api/players", json={"name": "Bob"}).status_code == 201
    assert anon.post("/api/players", json={"name": "Bob 2"}).status_code == 201
    reply = anon.post("/api/players", json={"name": "B\u043eb"})
    assert (reply.status_code, error_code(reply)) == (409, "name_taken")
    suggestion = reply.json()["error"]["suggestion"]
    assert suggestion.startswith("B\u043eb ")
    assert suggestion != "B\u043eb 2"
    assert anon.post("/api/players", json={"name": suggestion}).status_code == 201


def test_a_sign_up_flood_leaves_no_keys_once_the_trials_are_over(serve_app, host_config, sync_redis, tag):
    """A flood from many addresses (one here, its sign-up limit lifted): the rate limit bounds what one
    address mints; what every address mints is gone when the trials end."""
    settings = {"trial_ms": 300}
    many = Limits(signup_per_address=Rate(1000, 1))
    served = serve_app(dataclasses.replace(with_settings(host_config, **settings), limits=many))
    pattern = f"cmx:{{{tag}}}:*"

    def held() -> set[bytes]:  # the game's keys (the rate limits' buckets expire on their own)
        return {key for key in sync_redis.scan_iter(pattern) if b":bucket:" not in key}

    before = held()
    with served.client() as anon:
        joined = [anon.post("/api/players", json={"name": f"bot{n}"}) for n in range(150)]
    assert all(reply.status_code == 201 for reply in joined)
    assert len(held()) >= len(before) + 150 * 2  # record and token (no grant, no ledger)

    async def sweep() -> int:
        async with Game(Bus.from_url(host_config.redis_url, tag=tag), GameSettings(**settings)) as game:
            return await trials.Expirer(game).run_pass()

    deadline_ms = joined[-1].json()["expires_unless_played_ms"]
    wait_until(lambda: int(sync_redis.time()[0]) * 1000 > deadline_ms, timeout=10, what="the trial to end")
    assert run(sweep()) == 150
    assert held() == before
    with served.client(joined[0].json()["token"]) as bot:
        assert bot.get("/api/me").status_code == 401


def test_me_says_until_when_a_player_who_never_played_is_kept(join, operator):
    _, ada = join("Ada")
    me = ada.get("/api/me").json()
    assert me["expires_unless_played_ms"] == me["created_ms"] + 24 * 3600 * 1000
    the_round = open_round(operator, keyboard=FRUIT)
    guess = "".join(FRUIT[:6])
    assert ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": guess}).status_code == 202
    assert ada.get("/api/me").json()["expires_unless_played_ms"] is None


def test_the_score_worker_process_expires_players_who_never_played(join, sync_redis, redis_server, tag):
    """The sweep's runner: a real ``codemojex worker`` deletes a player whose trial is over (made due
    by setting its end to 0) and keeps one still on trial."""
    gone_id, gone = join("Gone")
    kept_id, _ = join("Kept")
    sync_redis.zadd(f"cmx:{{{tag}}}:trial", {gone_id: 0}, xx=True)
    process = worker_process(redis_server.url, tag)
    try:
        wait_until(lambda: not sync_redis.exists(f"cmx:{{{tag}}}:player:{gone_id}"), what="the expiry pass")
    finally:
        stop_worker(process)
    assert gone.get("/api/me").status_code == 401
    assert not [key for key in sync_redis.scan_iter(f"cmx:{{{tag}}}:*") if gone_id.encode() in key]
    assert sync_redis.exists(f"cmx:{{{tag}}}:player:{kept_id}")
