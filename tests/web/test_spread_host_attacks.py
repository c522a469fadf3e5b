"""Attacks on the web host of a spread game (``HostConfig(partitions=P)``), each against real Redis: a
client steering its requests to partitions of its choosing, reaching another partition's player, and the
spread host answering otherwise than the one-game host for the same requests."""

from __future__ import annotations

from typing import Any

import pytest

from codemojex import placement, players
from codemojex.web import HostConfig
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from tests.support.web import OPERATOR, Served

P = 3
NAMES = [f"Pl{i}" for i in range(60)]


def _crafted(partition: int) -> str:
    """A well-formed token (naming nobody) whose digest lands in ``partition``: anyone can draw one."""
    return placement.mint(players.new_token, players.token_digest, (partition, P))


def _names(count: int) -> list[str]:
    return NAMES[:count]


def _config(redis_server: Any, tag: str, partitions: int, **limits: Any) -> HostConfig:
    return HostConfig(
        redis_url=redis_server.url,
        tag=tag,
        operator_token=OPERATOR,
        partitions=partitions,
        sample_every_s=0.2,
        limits=Limits(**limits),
    )


def _signups(host: Served, tokens: list[str | None]) -> list[int]:
    statuses = []
    for i, token in enumerate(tokens):
        with host.client(token) as anon:
            statuses.append(anon.post("/api/players", json={"name": f"Sy{i}x"}).status_code)
    return statuses


@pytest.mark.parametrize("partitions", [1, P])
def test_a_sign_up_cannot_pick_its_rate_bucket_with_a_made_up_bearer_token(
    serve_app, redis_server, tag, partitions
):
    """POST /api/players is per address only: a made-up ``Authorization`` header (a token of each
    partition's digest) must not buy the address a fresh sign-up bucket in each partition (P times the
    sign-ups, each a starting grant)."""
    host = serve_app(_config(redis_server, tag, partitions, signup_per_address=Rate(2, 3_600_000)))
    tokens = [_crafted(p % P) for p in range(2 * P)]
    statuses = _signups(host, tokens)
    assert statuses.count(201) == 2, statuses
    assert set(statuses) == {201, 429}


@pytest.mark.parametrize("partitions", [1, P])
def test_a_recovery_sign_in_cannot_pick_its_rate_bucket_with_a_made_up_bearer_token(
    serve_app, redis_server, tag, partitions
):
    """POST /api/recover (a code guessed is a token) is per address only, whatever the bearer header."""
    host = serve_app(_config(redis_server, tag, partitions, recover_per_address=Rate(2, 3_600_000)))
    statuses = []
    for i in range(2 * P):
        with host.client(_crafted(i % P)) as anon:
            reply = anon.post("/api/recover", json={"code": "ABCD-EFGH-JKMN-PQRS-TVWX"})
            statuses.append(reply.status_code)
    assert statuses.count(401) == 2, statuses
    assert set(statuses) == {401, 429}
