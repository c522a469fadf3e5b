"""A true retry is always a duplicate, over real HTTP: the same Idempotency-Key and body after the
player's locks changed is the same job, charged once (never 409, which would make the client pay twice).

The app is served by uvicorn on a free port (tests.support.web); a real ``codemojex worker`` process
scores the guess that proves the hit to lock.
"""

from __future__ import annotations

from codemojex import wallet
from codemojex.game import Game
from tests.support.web import FRUIT, error_code, open_round, run, secret_of, wait_until


def _prove_position_0(client, path, secret) -> None:
    filler = next(key for key in FRUIT if key not in secret)
    assert client.post(path, json={"guess": [secret[0]] + [filler] * 5}).status_code == 202
    wait_until(lambda: client.get(path).json()["proven"].get("0") == secret[0], what="position 1 proven")


def _all_scored(client, path) -> bool:
    return {guess["state"] for guess in client.get(path).json()["guesses"]} == {"scored"}


def _ledger_of(client, job):
    return [entry for entry in client.get("/api/wallet").json()["ledger"] if entry["job_id"] == job]


def test_a_retry_after_an_unlock_is_a_duplicate_charged_once(
    served, operator, score_worker, sync_redis, tag, join
):
    """Lock, POST with a key, unlock, POST the same body and key again: 202 duplicate, charged once."""
    _, ada = join()
    round_id = open_round(operator)["round_id"]
    path = f"/api/rounds/{round_id}/guesses"
    secret = secret_of(sync_redis, tag, round_id)
    _prove_position_0(ada, path, secret)
    assert ada.put(f"/api/rounds/{round_id}/locks/0").status_code == 200
    body = {"guess": [FRUIT[0] if secret[0] != FRUIT[0] else FRUIT[1], *secret[1:]]}
    first = ada.post(path, json=body, headers={"Idempotency-Key": "retry-me"})
    assert first.status_code == 202, first.text
    assert first.json()["guess"] == secret  # the lock overlaid position 0
    assert ada.delete(f"/api/rounds/{round_id}/locks/0").json()["removed"] is True
    # The first guess solves: its scoring pays the solve reward (the economy); the wallet is compared
    # once that is done, so only a second charge could change it.
    wait_until(lambda: _all_scored(ada, path), what="both guesses scored")
    wallet_before = ada.get("/api/wallet").json()["balances"]
    again = ada.post(path, json=body, headers={"Idempotency-Key": "retry-me"})
    assert again.status_code == 202, again.text
    assert again.json()["status"] == "duplicate"
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["charged"] == first.json()["charged"]
    assert again.json()["guess"] == secret  # as admitted
    assert ada.get("/api/wallet").json()["balances"] == wallet_before
    assert [entry["reason"] for entry in _ledger_of(ada, first.json()["job_id"])] == ["guess"]


def test_a_retry_after_a_new_lock_is_a_duplicate_charged_once(
    served, operator, score_worker, sync_redis, tag, join
):
    """POST with a key, lock a proven position, POST the same body and key again: duplicate, once."""
    _, ada = join()
    round_id = open_round(operator)["round_id"]
    path = f"/api/rounds/{round_id}/guesses"
    secret = secret_of(sync_redis, tag, round_id)
    _prove_position_0(ada, path, secret)
    other = FRUIT[0] if secret[0] != FRUIT[0] else FRUIT[1]
    body = {"guess": "".join([other, *secret[1:]])}
    first = ada.post(path, json=body, headers={"Idempotency-Key": "k2"})
    assert (first.status_code, first.json()["status"]) == (202, "admitted")
    assert ada.put(f"/api/rounds/{round_id}/locks/0").status_code == 200
    again = ada.post(path, json=body, headers={"Idempotency-Key": "k2"})
    assert again.status_code == 202, again.text
    assert again.json()["status"] == "duplicate"
    assert again.json()["guess"] == first.json()["guess"] == [other, *secret[1:]]
    assert [entry["reason"] for entry in _ledger_of(ada, first.json()["job_id"])] == ["guess"]


def test_a_refusal_of_the_moment_keeps_the_key_so_a_later_admission_is_the_one_job(served, operator, join):
    """Refused for want of funds, a keyed request keeps its JOB: after a top-up, one job paid once."""
    round_id = open_round(operator, prices=[{"currency": "gem", "amount": 2}])["round_id"]
    player_id, ada = join()
    path = f"/api/rounds/{round_id}/guesses"
    body = {"guess": "🍎🍌🍇🍒🥝🍑"}
    refused = ada.post(path, json=body, headers={"Idempotency-Key": "pay-later"})
    assert (refused.status_code, error_code(refused)) == (402, "insufficient_funds")
    job = refused.json()["error"]["job_id"]

    async def top_up() -> None:
        async with Game.from_url(served.config.redis_url, served.config.tag) as game:
            await wallet.credit(game, player_id, "gem", 4, reason="prize")

    run(top_up())
    # A copy of the refused request that was in flight, then its retry: both name the one JOB.
    admitted = ada.post(path, json=body, headers={"Idempotency-Key": "pay-later"})
    again = ada.post(path, json=body, headers={"Idempotency-Key": "pay-later"})
    assert (admitted.status_code, admitted.json()["job_id"]) == (202, job), admitted.text
    assert (again.json()["status"], again.json()["job_id"]) == ("duplicate", job)
    charges = [e for e in ada.get("/api/wallet").json()["ledger"] if e["reason"] == "guess"]
    assert [(e["job_id"], e["delta"]) for e in charges] == [(job, -2)]  # paid once
