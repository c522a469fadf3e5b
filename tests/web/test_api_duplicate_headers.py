"""Duplicate headers against a real host (issue 12, adversary): the admission middleware and the routes
must read the same ``Authorization`` header. Were the limiter to read the last one and the routes the
first, a player would send their own token first and a fresh random one after it: the routes act for the
player while every request lands in a new per-player bucket, and the per-player limits vanish."""

from __future__ import annotations

import dataclasses

import pytest

from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import FRUIT, error_code, open_round


@pytest.fixture
def host_config(host_config):
    limits = Limits(guess_per_player=Rate(3, 3_600_000), read_per_player=Rate(3, 3_600_000))
    return dataclasses.replace(host_config, limits=limits)


def test_a_second_authorization_header_does_not_buy_a_fresh_player_bucket(served, operator, join):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    token = ada.headers["authorization"]
    codes = []
    with served.client() as raw:
        for n in range(6):
            headers = [("Authorization", token), ("Authorization", f"Bearer decoy-{n}-{'x' * 40}")]
            reply = raw.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]}, headers=headers)
            codes.append(reply.status_code if reply.status_code != 429 else error_code(reply))
    assert codes.count(202) == 3, codes  # the player's own bucket: 3 guesses, then refused
    assert codes[3:] == ["rate_limited"] * 3, codes


def test_rotating_the_token_does_not_refill_the_players_guess_bucket(served, operator, join):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    path = f"/api/rounds/{round_id}/guesses"
    first = [ada.post(path, json={"guess": FRUIT[:6]}).status_code for _ in range(3)]
    assert first == [202] * 3
    rotated = ada.post("/api/me/token")
    assert rotated.status_code == 200
    ada.headers["authorization"] = f"Bearer {rotated.json()['token']}"
    assert ada.post(path, json={"guess": FRUIT[:6]}).status_code == 429
