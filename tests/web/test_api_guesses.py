"""The guess API over real HTTP: every status a guess can get, and that a refusal changes nothing.

The app is served by uvicorn on a free port (tests.support.web), on a real redis-server; scoring is done
by a real ``codemojex worker`` process where a test needs feedback.
"""

from __future__ import annotations

import pytest

from codemojex.keys import GameKeys
from echomq.keyspace import Keyspace
from tests.support.probe import Probe
from tests.support.web import (
    FRUIT,
    error_code,
    game_state,
    open_round,
    secret_of,
    wait_until,
    with_settings,
)


def snapshot(sync_redis, tag):
    """Every key of the bus and of the game, with its type and value (but the rate limits' buckets, which
    every request moves: admission bookkeeping, not game state)."""
    out = dict(Probe(sync_redis, Keyspace(tag)).snapshot())
    out.update(Probe(sync_redis, GameKeys(tag)).snapshot())  # type: ignore[arg-type]
    return game_state(out)


def balances(client):
    reply = client.get("/api/wallet")
    assert reply.status_code == 200
    return reply.json()["balances"]


@pytest.fixture
def fruit_round(operator):
    return open_round(operator)


def test_an_admitted_guess_is_202_with_its_job_and_charge(served, fruit_round, join):
    _, ada = join()
    reply = ada.post(f"/api/rounds/{fruit_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 202
    body = reply.json()
    assert body["status"] == "admitted"
    assert body["job_id"].startswith("JOB")
    assert body["charged"] == {"currency": "ticket", "amount": 1}
    assert body["guess"] == ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑"]
    assert balances(ada) == {"coin": 50, "ticket": 2}
    ledger = ada.get("/api/wallet").json()["ledger"]
    assert ledger[-1] == {
        "at_ms": ledger[-1]["at_ms"],
        "currency": "ticket",
        "delta": -1,
        "balance": 2,
        "reason": "guess",
        "job_id": body["job_id"],
    }


def test_a_retry_with_the_same_idempotency_key_is_the_same_job_charged_once(served, fruit_round, join):
    _, ada = join()
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    first = ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "try-1"})
    again = ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "try-1"})
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json()["status"] == "admitted"
    assert again.json()["status"] == "duplicate"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["charged"] == {"currency": "ticket", "amount": 1}  # the original charge
    assert balances(ada) == {"coin": 50, "ticket": 2}
    assert len(ada.get(path).json()["guesses"]) == 1


def test_the_same_key_with_another_guess_is_409_and_changes_nothing(
    served, fruit_round, sync_redis, tag, join
):
    _, ada = join()
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "k"})
    before = snapshot(sync_redis, tag)
    reply = ada.post(path, json={"guess": "🍑🍑🍑🍑🍑🍑"}, headers={"Idempotency-Key": "k"})
    assert reply.status_code == 409
    assert error_code(reply) == "idempotency_conflict"
    assert snapshot(sync_redis, tag) == before


def test_idempotency_keys_are_per_player(served, fruit_round, join):
    """Two players may use the same key: each gets their own job."""
    _, ada = join("Ada")
    _, bob = join("Bob")
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    one = ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "same"})
    two = bob.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "same"})
    assert one.json()["status"] == two.json()["status"] == "admitted"
    assert one.json()["job_id"] != two.json()["job_id"]


@pytest.mark.parametrize(
    ("guess", "problem"),
    [
        ("🍎🍌🍇", "wrong_length"),
        ("🍎🍌🍇🍒🥝🚗", "off_keyboard"),
        ("🍎 🍌🍇🍒🥝🍑", "whitespace"),
        (["🍎", None, "🍇", "🍒", "🥝", "🍑"], "blank"),
        ("", "empty"),
    ],
)
def test_a_bad_guess_is_400_with_its_problem_and_charges_nothing(
    served, fruit_round, sync_redis, tag, guess, problem, join
):
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        json={"guess": guess},
        headers={"Idempotency-Key": "x"},
    )
    assert reply.status_code == 400
    assert error_code(reply) == "invalid_guess"
    assert reply.json()["error"]["problem"] == problem
    after = snapshot(sync_redis, tag)
    if problem == "blank":  # a lock could fill the blank for a copy of this request: its key names its JOB
        kept = {key for key in after.keys() - before.keys() if ":idempotency:" in str(key)}
        assert len(kept) == 1
        after = {key: value for key, value in after.items() if key not in kept}
    assert after == before  # nothing else changed (and a guess that cannot parse keeps no key)


def test_a_lone_surrogate_in_a_guess_is_400_control_and_charges_nothing(
    served, fruit_round, sync_redis, tag, join
):
    """A JSON escape of a lone surrogate is a bad guess (a control character), never a 500."""
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        content=b'{"guess": "\\ud83c\\udf4e\\ud800\\ud83c\\udf4c"}',
        headers={"Content-Type": "application/json"},
    )
    assert (reply.status_code, error_code(reply)) == (400, "invalid_guess")
    assert reply.json()["error"]["problem"] == "control"
    assert snapshot(sync_redis, tag) == before
    keyed = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        content=b'{"guess": "\\ud800\\ud83c\\udf4c"}',
        headers={"Content-Type": "application/json", "Idempotency-Key": "k1"},
    )
    assert (keyed.status_code, error_code(keyed)) == (400, "invalid_guess")
    assert snapshot(sync_redis, tag) == before


def test_no_token_or_a_bad_token_is_401(served, fruit_round):
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    with served.client() as nobody:
        assert nobody.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).status_code == 401
    with served.client("not-a-token-of-anyone-at-all") as stranger:
        reply = stranger.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 401
    assert error_code(reply) == "unauthorized"
    assert reply.headers["www-authenticate"] == "Bearer"


def test_insufficient_funds_is_402_and_charges_nothing(served, operator, sync_redis, tag, join):
    gem_round = open_round(operator, prices=[{"currency": "gem", "amount": 1}])
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(f"/api/rounds/{gem_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 402
    assert error_code(reply) == "insufficient_funds"
    assert snapshot(sync_redis, tag) == before


def test_the_price_list_falls_back_to_coins_when_tickets_run_out(served, fruit_round, join):
    _, ada = join()
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    charged = [ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).json()["charged"] for _ in range(4)]
    assert [c["currency"] for c in charged] == ["ticket", "ticket", "ticket", "coin"]
    assert balances(ada) == {"coin": 45, "ticket": 0}


def test_an_unknown_round_is_404_and_an_ill_formed_one_400(served, join):
    _, ada = join()
    unknown = ada.post("/api/rounds/RND00000000000000000000000/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert unknown.status_code == 404
    assert error_code(unknown) == "unknown_round"
    bad = ada.post("/api/rounds/nope/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert bad.status_code == 400
    assert error_code(bad) == "invalid_id"


def test_a_closed_round_is_409(served, operator, fruit_round, sync_redis, tag, join):
    _, ada = join()
    assert operator.post(f"/api/operator/rounds/{fruit_round['round_id']}/close").status_code == 200
    before = snapshot(sync_redis, tag)
    reply = ada.post(f"/api/rounds/{fruit_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 409
    assert error_code(reply) == "round_closed"
    assert snapshot(sync_redis, tag) == before


def test_the_guess_limit_is_409_max_guesses(served, operator, join):
    limited = open_round(operator, max_guesses=1)
    _, ada = join()
    path = f"/api/rounds/{limited['round_id']}/guesses"
    assert ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).status_code == 202
    reply = ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 409
    assert error_code(reply) == "max_guesses"


def test_a_body_over_the_limit_is_413(served, fruit_round, join):
    _, ada = join()
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    reply = ada.post(
        path, content=b'{"guess": "' + b"a" * 9000 + b'"}', headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413
    assert error_code(reply) == "body_too_large"


def test_a_streamed_body_over_the_limit_is_413(served, fruit_round, join):
    """No Content-Length: the limit counts the chunks as they arrive."""
    _, ada = join()

    def chunks():
        yield b'{"guess": "'
        for _ in range(20):
            yield b"a" * 1000
        yield b'"}'

    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 413
    assert error_code(reply) == "body_too_large"


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[1, 2]",
        b'{"guess": 7}',
        b'{"guesses": "typo"}',
        b'{"guess": "\\ud83c\\udf4e", "extra": 1}',
        b'{"guess": "x", "locks": "0"}',
    ],
)
def test_a_malformed_body_is_422(served, fruit_round, sync_redis, tag, content, join):
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        content=content,
        headers={"content-type": "application/json"},
    )
    assert reply.status_code == 422
    assert error_code(reply) == "malformed_body"
    assert reply.json()["error"]["errors"]
    assert snapshot(sync_redis, tag) == before


def test_too_many_queued_guesses_is_429(serve_app, host_config, join):
    served = serve_app(with_settings(host_config, max_queued=2))
    with served.client("operator-token-of-the-tests") as operator:
        the_round = open_round(operator)
    _, ada = join(on=served)
    path = f"/api/rounds/{the_round['round_id']}/guesses"
    assert [ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}).status_code for _ in range(2)] == [202, 202]
    reply = ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert reply.status_code == 429
    assert error_code(reply) == "too_many_queued"
    assert balances(ada) == {"coin": 50, "ticket": 1}


def test_my_guesses_go_from_queued_to_scored_with_feedback(
    served, fruit_round, score_worker, sync_redis, tag, join
):
    _, ada = join()
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    secret = secret_of(sync_redis, tag, fruit_round["round_id"])
    job = ada.post(path, json={"guess": secret}).json()["job_id"]

    def scored():
        listed = ada.get(path).json()["guesses"]
        return listed if listed and listed[0]["state"] == "scored" else None

    [mine] = wait_until(scored, what="the guess being scored")
    assert mine["job_id"] == job
    assert mine["guess"] == secret
    assert mine["feedback"]["code"] == "HHHHHH"
    assert mine["feedback"]["marks"] == ["hit"] * 6
    assert mine["feedback"]["solved"] is True
    assert mine["attempt"] == 1
    assert mine["counted"] is True
    board = ada.get(f"/api/rounds/{fruit_round['round_id']}/leaderboard").json()["entries"]
    assert board == [
        {"rank": 1, "player_id": board[0]["player_id"], "name": "Ada", "solved": True, "hits": 6, "nears": 0,
         "attempts": 1, "best_at_ms": mine["submitted_ms"]}
    ]  # fmt: skip
    after = ada.post(path, json={"guess": secret})
    assert after.status_code == 409
    assert error_code(after) == "already_solved"


def test_other_players_guesses_are_not_listed(served, fruit_round, join):
    _, ada = join("Ada")
    _, bob = join("Bob")
    path = f"/api/rounds/{fruit_round['round_id']}/guesses"
    ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert bob.get(path).json()["guesses"] == []
    assert len(ada.get(path).json()["guesses"]) == 1


def test_a_lock_needs_a_proven_hit_and_then_fills_its_slot(
    served, fruit_round, score_worker, sync_redis, tag, join
):
    _, ada = join()
    round_id = fruit_round["round_id"]
    path = f"/api/rounds/{round_id}/guesses"
    secret = secret_of(sync_redis, tag, round_id)
    before = snapshot(sync_redis, tag)
    refused = ada.post(path, json={"guess": [None, *secret[1:]], "locks": [0]})
    assert refused.status_code == 400
    assert error_code(refused) == "not_proven"
    assert snapshot(sync_redis, tag) == before
    first = [secret[0]] + [key for key in FRUIT if key not in secret][:1] * 5  # a hit at position 0
    ada.post(path, json={"guess": first})
    wait_until(lambda: ada.get(path).json()["proven"].get("0") == secret[0], what="position 1 being proven")
    assert ada.get(path).json()["proven"] == {"0": secret[0]}  # the filler is not in the secret
    unproven = ada.put(f"/api/rounds/{round_id}/locks/5")
    assert (unproven.status_code, error_code(unproven)) == (400, "not_proven")
    locked = ada.post(path, json={"guess": [None, *secret[1:]], "locks": [0]})
    assert locked.status_code == 202, locked.text
    assert locked.json()["guess"] == secret
    assert ada.get(path).json()["locks"] == {"0": secret[0]}
    assert ada.delete(f"/api/rounds/{round_id}/locks/0").json() == {"position": 0, "removed": True}
    assert ada.get(path).json()["locks"] == {}
    assert ada.put(f"/api/rounds/{round_id}/locks/0").json() == {"position": 0, "key": secret[0]}
    out_of_range = ada.put(f"/api/rounds/{round_id}/locks/6")
    assert (out_of_range.status_code, error_code(out_of_range)) == (400, "invalid_option")


def test_a_job_shows_where_it_is_and_its_scored_count(served, fruit_round, operator, score_worker, tag, join):
    player_id, ada = join()
    _, bob = join("Bob")
    job = ada.post(f"/api/rounds/{fruit_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"}).json()[
        "job_id"
    ]
    done = wait_until(lambda: (r := ada.get(f"/api/jobs/{job}").json())["state"] == "done" and r, what="done")
    assert done["location"] == f"emq:{{{tag}}}:done"
    assert done["lane"] == player_id
    assert done["attempts"] == 1
    assert done["scored_count"] == 1
    assert done["guess_id"] == "GES" + job[3:]
    assert done["deadline_ms"] is None
    stranger = bob.get(f"/api/jobs/{job}")
    assert (stranger.status_code, error_code(stranger)) == (404, "unknown_job")
    assert operator.get(f"/api/jobs/{job}").json()["scored_count"] == 1
    missing = ada.get("/api/jobs/JOB00000000000000000000000")
    assert (missing.status_code, error_code(missing)) == (404, "unknown_job")
    assert error_code(ada.get("/api/jobs/GES00000000000000000000000")) == "invalid_id"


def test_a_queued_job_is_in_its_lane(served, fruit_round, tag, join):
    player_id, ada = join()
    job = ada.post(f"/api/rounds/{fruit_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"}).json()[
        "job_id"
    ]
    shown = ada.get(f"/api/jobs/{job}").json()
    assert shown["state"] == "queued"
    assert shown["location"] == f"emq:{{{tag}}}:lane:{player_id}"
    assert shown["attempts"] == 0
    assert shown["scored_count"] == 0


@pytest.mark.parametrize("key", ["", "k" * 129, "ключ", "tab\there"])
def test_an_ill_formed_idempotency_key_is_400_and_changes_nothing(
    served, fruit_round, sync_redis, tag, join, key
):
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses",
        json={"guess": "🍎🍌🍇🍒🥝🍑"},
        headers={"Idempotency-Key": key.encode("utf-8")},
    )
    assert reply.status_code == 400
    assert error_code(reply) == "invalid_input"
    assert snapshot(sync_redis, tag) == before


@pytest.mark.parametrize(
    ("locks", "code"), [([6], "invalid_option"), ([-1], "invalid_option"), ([0], "not_proven")]
)
def test_bad_locks_in_a_guess_are_400_and_charge_nothing(
    served, fruit_round, sync_redis, tag, join, locks, code
):
    _, ada = join()
    before = snapshot(sync_redis, tag)
    reply = ada.post(
        f"/api/rounds/{fruit_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑", "locks": locks}
    )
    assert (reply.status_code, error_code(reply)) == (400, code)
    assert snapshot(sync_redis, tag) == before


def test_a_guess_in_a_round_that_opens_later_is_409_round_not_open(served, operator, join):
    later = open_round(operator, delay_s=3600)
    assert later["status"] == "scheduled"
    _, ada = join()
    reply = ada.post(f"/api/rounds/{later['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    assert (reply.status_code, error_code(reply)) == (409, "round_not_open")
