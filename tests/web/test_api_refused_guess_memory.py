"""Memory an attacker leaves for free (issue 12, adversary): a guess refused for the moment (no funds,
a closed round) costs nothing, yet its ``Idempotency-Key`` is kept for 24 h so that a retry after a
top-up cannot pay twice (:mod:`codemojex.web.idempotency`). A player with an empty wallet, one fresh
key per request, leaves one key per refused request: at the per-address guess rate (10 a second) some
864,000 keys a day per client, under ``noeviction``."""

from __future__ import annotations

import dataclasses

import pytest
import redis

from codemojex.keys import GameKeys
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import FRUIT, open_round


@pytest.fixture
def host_config(host_config):
    fast = Rate(1000, 1)  # the attack at the limiter's pace, sped up: the limits are not what it tests
    return dataclasses.replace(host_config, limits=Limits(guess_per_address=fast, guess_per_player=fast))


@pytest.mark.xfail(
    strict=True,
    reason="design: a refusal of the moment keeps its Idempotency-Key 24 h (a retry after a top-up must "
    "name the same JOB); a shorter life for keys no guess was admitted under needs a fenced extension",
)
def test_refused_guesses_with_fresh_keys_leave_no_day_long_keys(redis_server, tag, operator, join):
    round_id = open_round(operator)["round_id"]
    player_id, ada = join("Ada")
    path = f"/api/rounds/{round_id}/guesses"
    admitted = 0
    for n in range(40):
        reply = ada.post(path, json={"guess": FRUIT[:6]}, headers={"Idempotency-Key": f"k{n}"})
        admitted += reply.status_code == 202
        assert reply.status_code in (202, 402), reply.text
    assert 0 < admitted < 40  # the grant ran out: the rest were refused for no funds
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = GameKeys(tag)
        kept = list(client.scan_iter(match=f"{keys.prefix}idempotency:{player_id}:*", count=1000))
        long_lived = [key for key in kept if client.pttl(key) > 3_600_000]
    finally:
        client.close()
    assert len(long_lived) <= admitted
