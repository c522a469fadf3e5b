"""Attacks on the web host of a spread game (``HostConfig(partitions=P)``), each against real Redis: a
client steering its requests to partitions of its choosing, reaching another partition's player, and the
spread host answering otherwise than the one-game host for the same requests."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from codemojex import names, placement, players
from codemojex.web import HostConfig
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from echomq.testing.cluster import RedisClusterProcesses
from tests.support.cluster import spread_tag
from tests.support.web import (
    FRUIT,
    OPERATOR,
    Served,
    error_code,
    open_round,
    stop_worker,
    wait_until,
    worker_process,
)

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


@pytest.mark.parametrize("partitions", [1, P])
def test_public_reads_cannot_pick_their_address_bucket_with_made_up_bearer_tokens(
    serve_app, redis_server, tag, partitions
):
    """A read's address bucket is one per address however many partitions: made-up tokens of each
    partition's digest (each naming nobody) must not multiply an address's reads by P (the board and
    the metrics read every partition, so that would be P squared calls)."""
    host = serve_app(_config(redis_server, tag, partitions, read_per_address=Rate(4, 3_600_000)))
    statuses = []
    for i in range(4 * P):
        with host.client(_crafted(i % P)) as anon:
            statuses.append(anon.get("/api/lobby").status_code)
    assert statuses.count(200) == 4, statuses
    assert set(statuses) == {200, 429}


@pytest.mark.parametrize("partitions", [1, P])
def test_a_players_reads_still_count_in_their_own_bucket_and_their_addresss(
    serve_app, redis_server, tag, partitions
):
    """The player's read bucket follows the player (in their partition), the address's the address; a
    request the player's bucket refuses costs the address nothing, as on one game."""
    host = serve_app(
        _config(
            redis_server,
            tag,
            partitions,
            read_per_player=Rate(3, 3_600_000),
            read_per_address=Rate(5, 3_600_000),
        )
    )
    tokens = []
    for name in ("Ada", "Bob"):
        with host.client() as anon:
            tokens.append(anon.post("/api/players", json={"name": name}).json()["token"])
    with host.client(tokens[0]) as ada, host.client(tokens[1]) as bob:
        first = [ada.get("/api/me").status_code for _ in range(4)]
        assert first == [200, 200, 200, 429]
        assert error_code(ada.get("/api/me")) == "rate_limited"
        second = [bob.get("/api/me").status_code for _ in range(3)]
    assert second == [200, 200, 429]  # the address's five: Ada's three, Bob's two


def test_a_worker_started_with_partitions_1_scores_the_guesses_of_a_host_of_partitions_1(
    serve_app, redis_server, tag
):
    """``--partitions 1`` is one game on the host (``HostConfig(partitions=1)``, the default): the worker
    given the same count must serve the same keys, not a spread game over ``<tag>.0`` where no guess of
    that host ever lands (each charged and never scored)."""
    host = serve_app(_config(redis_server, tag, 1))
    worker = worker_process(redis_server.url, tag, partitions=1)
    try:
        with host.client(OPERATOR) as operator:
            round_id = open_round(operator)["round_id"]
            with host.client() as anon:
                token = anon.post("/api/players", json={"name": "Ada"}).json()["token"]
            with host.client(token) as me:
                reply = me.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]})
                assert reply.status_code == 202, reply.text
                job = reply.json()["job_id"]

                def scored() -> bool:
                    return bool(me.get(f"/api/jobs/{job}").json()["scored_count"] == 1)

                wait_until(scored, timeout=15, what="the guess scored")
    finally:
        stop_worker(worker)


@pytest.mark.parametrize(
    "partitions",
    [
        1,
        P,
    ],
)
def test_a_closed_round_reaches_the_history_as_on_one_game(serve_app, redis_server, tag, partitions):
    host = serve_app(_config(redis_server, tag, partitions))
    worker = worker_process(redis_server.url, tag, partitions=partitions)
    try:
        with host.client(OPERATOR) as operator:
            round_id = open_round(operator)["round_id"]
            assert operator.post(f"/api/operator/rounds/{round_id}/close").status_code == 200

            def listed() -> bool:
                rounds = operator.get("/api/history").json()["rounds"]
                return any(summary["round_id"] == round_id for summary in rounds)

            wait_until(listed, timeout=15, what="the round in the history")
    finally:
        stop_worker(worker)


def _one_name_per_partition() -> list[str]:
    found: dict[int, str] = {}
    for name in NAMES:
        found.setdefault(zlib.crc32(names.skeleton(name).encode()) % P, name)
    return [found[p] for p in range(P)]


@pytest.mark.slow
def test_on_a_cluster_an_addresss_buckets_are_one_whatever_partition_a_made_up_token_names(serve_app):
    """The same on a three-master cluster (each partition on a master of its own, the home's address
    bucket on another master than most players' buckets): made-up tokens buy no sign-up or read beyond
    the address's one bucket, and a player of every partition is still served."""
    with RedisClusterProcesses(3) as cluster:
        config = HostConfig(
            redis_url=f"redis://127.0.0.1:{cluster.ports[0]}/0",
            tag=spread_tag("atk"),
            cluster=True,
            partitions=P,
            operator_token=OPERATOR,
            limits=Limits(signup_per_address=Rate(P, 3_600_000), read_per_address=Rate(2 * P, 3_600_000)),
        )
        host = serve_app(config)
        try:
            tokens = []
            for p, name in enumerate(_one_name_per_partition()):  # each with a made-up token of its own
                with host.client(_crafted((p + 1) % P)) as anon:
                    reply = anon.post("/api/players", json={"name": name})
                assert reply.status_code == 201, reply.text
                tokens.append((name, reply.json()["token"]))
            assert _signups(host, [_crafted(p) for p in range(P)]) == [429] * P
            for name, token in tokens:  # P reads of the address's 2P: one per player
                with host.client(token) as me:
                    assert me.get("/api/me").json()["name"] == name
            statuses = []
            for i in range(2 * P):
                with host.client(_crafted(i % P)) as anon:
                    statuses.append(anon.get("/api/lobby").status_code)
            assert statuses.count(200) == P, statuses
        finally:
            host.stop()
