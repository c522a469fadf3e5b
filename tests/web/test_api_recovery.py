"""Recovery codes over real HTTP: the code comes with the sign-up, trades for a token on another device
(the first device's token still works), a wrong code, a wrong name and an unknown player are one 401,
guessing is rate-limited per address (fail closed), a new code revokes the old one, and "sign out
everywhere else" ends the other devices' tokens."""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading

import httpx

from codemojex import players, recovery
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import error_code


def sign_up(anon, name: str = "Ada") -> dict:
    reply = anon.post("/api/players", json={"name": name})
    assert reply.status_code == 201, reply.text
    body: dict = reply.json()
    return body


def test_the_sign_up_shows_a_code_that_signs_in_on_another_device(served, anon):
    ada = sign_up(anon)
    code = ada["recovery_code"]
    assert recovery.normalise(code)
    reply = anon.post("/api/recover", json={"code": code.lower().replace("-", " ")})
    assert reply.status_code == 200, reply.text
    second = reply.json()
    assert (second["player_id"], second["name"]) == (ada["player_id"], "Ada")
    assert second["token"] != ada["token"]
    assert second["token_expires_ms"] > 0
    with served.client(second["token"]) as phone, served.client(ada["token"]) as laptop:
        assert phone.get("/api/me").json()["player_id"] == ada["player_id"]
        assert laptop.get("/api/me").status_code == 200, "the first device keeps playing"
        assert phone.get("/api/me").json()["has_recovery_code"] is True
        wallet = phone.get("/api/wallet").json()
        assert wallet["player_id"] == ada["player_id"], "the phone reads the same player's wallet"
        assert wallet["ledger_total"] == laptop.get("/api/wallet").json()["ledger_total"]


def test_a_wrong_code_a_wrong_name_and_an_unknown_player_are_one_401(anon):
    ada = sign_up(anon)
    answers = [
        anon.post("/api/recover", json={"code": recovery.new_code()}),
        anon.post("/api/recover", json={"code": ada["recovery_code"], "name": "Bob"}),
        anon.post("/api/recover", json={"code": recovery.new_code(), "name": "Nobody"}),
    ]
    assert [(r.status_code, error_code(r)) for r in answers] == [(401, "bad_recovery_code")] * 3
    assert len({r.json()["error"]["message"] for r in answers}) == 1, "nothing tells the cases apart"
    named = anon.post("/api/recover", json={"code": ada["recovery_code"], "name": "ADA"})
    assert named.status_code == 200, "the name is checked as names are compared (its skeleton)"


def test_text_that_cannot_be_a_code_is_400(anon):
    for bad in ("", "1234", "U" * 20, "x" * 64):
        reply = anon.post("/api/recover", json={"code": bad})
        assert (reply.status_code, error_code(reply)) == (400, "invalid_option"), bad
    assert anon.post("/api/recover", json={"code": "x" * 65}).status_code == 422


def test_a_new_code_revokes_the_old_one_and_needs_the_token(served, anon):
    ada = sign_up(anon)
    assert anon.post("/api/me/recovery").status_code == 401
    with served.client(ada["token"]) as client:
        reply = client.post("/api/me/recovery")
    assert reply.status_code == 200
    new = reply.json()["recovery_code"]
    assert new != ada["recovery_code"]
    assert anon.post("/api/recover", json={"code": ada["recovery_code"]}).status_code == 401
    assert anon.post("/api/recover", json={"code": new}).status_code == 200


def test_signing_out_everywhere_else_ends_the_other_tokens(served, anon):
    ada = sign_up(anon)
    reply = anon.post("/api/recover", json={"code": ada["recovery_code"], "sign_out_others": True})
    assert reply.status_code == 200
    with served.client(ada["token"]) as laptop, served.client(reply.json()["token"]) as phone:
        assert laptop.get("/api/me").status_code == 401
        assert phone.get("/api/me").status_code == 200


def test_guessing_codes_is_rate_limited_per_address(serve_app, host_config):
    limits = Limits(recover_per_address=Rate(3, 3_600_000))
    served = serve_app(dataclasses.replace(host_config, limits=limits))
    with served.client() as anon:
        ada = sign_up(anon)
        for _ in range(3):
            assert anon.post("/api/recover", json={"code": recovery.new_code()}).status_code == 401
        refused = anon.post("/api/recover", json={"code": ada["recovery_code"]})
        assert (refused.status_code, error_code(refused)) == (429, "rate_limited")
        assert int(refused.headers["Retry-After"]) > 0
        assert anon.get("/api/rounds").status_code == 200, "other calls have their own buckets"


def test_a_lost_sign_in_reply_is_retried_and_both_tokens_name_the_player(served, anon):
    ada = sign_up(anon)
    first = anon.post("/api/recover", json={"code": ada["recovery_code"]}).json()
    again = anon.post("/api/recover", json={"code": ada["recovery_code"]}).json()
    assert first["token"] != again["token"]
    with served.client(again["token"]) as client:
        assert client.get("/api/me").json()["player_id"] == ada["player_id"]


def test_a_broken_limiter_refuses_recovery_sign_ins(serve_app, host_config, sync_redis, tag):
    """Fail closed, as sign-ups: a sign-in mints a token, so no limiter means no sign-in (503)."""
    served = serve_app(host_config)
    address = hashlib.sha256(b"127.0.0.1").hexdigest()
    sync_redis.hset(f"cmx:{{{tag}}}:bucket:recover:a:{address}", "x", "1")  # the script fails on it
    with served.client() as anon:
        ada = sign_up(anon)
        refused = anon.post("/api/recover", json={"code": ada["recovery_code"]})
    assert (refused.status_code, error_code(refused)) == (503, "unavailable")
    assert "retry-after" in refused.headers


def test_concurrent_new_codes_all_answer_and_leave_one_code(served, anon, sync_redis, tag):
    """A client firing many ``POST /api/me/recovery`` at once (two tabs, or on purpose) gets an answer to
    each, never a 500, and exactly one code works afterwards: the last one issued."""
    ada = sign_up(anon)
    replies: list[httpx.Response] = []

    def ask() -> None:
        with served.client(ada["token"]) as client:
            replies.extend(client.post("/api/me/recovery") for _ in range(4))

    threads = [threading.Thread(target=ask) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted({reply.status_code for reply in replies}) == [200], [r.text for r in replies][:3]
    codes = sync_redis.keys(f"cmx:{{{tag}}}:recovery:*")
    assert len(codes) == 1, "one code in force: every older one revoked"
    current = sync_redis.hget(f"cmx:{{{tag}}}:player:{ada['player_id']}", "recovery").decode()
    assert codes[0].decode().endswith(current)


def test_signing_out_everywhere_else_ends_a_token_from_before_token_keys(served, anon, sync_redis, tag):
    """A player from before token keys holds a token in the legacy ``tokens`` hash (until the sweep
    moves it): "sign out my other devices" must end it too, or a thief holding it keeps playing (and the
    sweep would then adopt it as the player's token for a full lifetime)."""
    ada = sign_up(anon)
    legacy = secrets.token_urlsafe(32)
    tokens_hash = f"cmx:{{{tag}}}:tokens"
    sync_redis.hset(tokens_hash, players.token_digest(legacy), ada["player_id"])
    sync_redis.hdel(f"cmx:{{{tag}}}:player:{ada['player_id']}", "token")  # as a record of then: none
    sync_redis.delete(f"cmx:{{{tag}}}:token:{players.token_digest(ada['token'])}")
    other = secrets.token_urlsafe(32)  # another legacy player's token stays
    sync_redis.hset(tokens_hash, players.token_digest(other), "PLR00000000000000000000000")
    with served.client(legacy) as thief:
        assert thief.get("/api/me").status_code == 200
        reply = anon.post("/api/recover", json={"code": ada["recovery_code"], "sign_out_others": True})
        assert reply.status_code == 200
        assert thief.get("/api/me").status_code == 401
    assert sync_redis.hkeys(tokens_hash) == [players.token_digest(other).encode()]
    with served.client(reply.json()["token"]) as phone:
        assert phone.get("/api/me").status_code == 200


def test_concurrent_sign_ins_keep_the_sessions_cap(serve_app, host_config, sync_redis, tag):
    """Twenty sign-ins with one code at once (a thief racing the cap): at most ``MAX_SESSIONS`` of the
    tokens they got work afterwards, beside the player's own, and every token key left is one of them."""
    limits = Limits(recover_per_address=Rate(100, 1000))
    served = serve_app(dataclasses.replace(host_config, limits=limits))
    with served.client() as anon:
        ada = sign_up(anon)
    got: list[str] = []

    def sign_in() -> None:
        with served.client() as client:
            reply = client.post("/api/recover", json={"code": ada["recovery_code"]})
            assert reply.status_code == 200, reply.text
            got.append(reply.json()["token"])

    threads = [threading.Thread(target=sign_in) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 20
    working = []
    for token in got:
        with served.client(token) as client:
            if client.get("/api/me").status_code == 200:
                working.append(token)
    assert len(working) == recovery.MAX_SESSIONS
    left = sync_redis.keys(f"cmx:{{{tag}}}:token:*")
    assert len(left) == recovery.MAX_SESSIONS + 1, "the sessions and the first device's token"
