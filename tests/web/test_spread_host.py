"""The web host on a spread game (``HostConfig.partitions``, ``python -m codemojex.web --partitions P``):
every player route finds the caller's partition from their token alone, guesses on both paths land and
are scored in the player's partition by ``codemojex worker --partitions P``, and what the host shows of
the whole game (board, stats, dead letters, the operator's rounds) is every partition's."""

from __future__ import annotations

import dataclasses
import json
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from codemojex import names, placement, players, recovery, spread
from codemojex.errors import InvalidInput, InvalidOption
from codemojex.keys import GameKeys
from codemojex.spread import SpreadGame
from codemojex.web import HostConfig, create_app
from echomq.keyspace import Keyspace
from echomq.partitions import partition_of, partition_tags
from tests.support.web import (
    FRUIT,
    OPERATOR,
    Served,
    error_code,
    open_round,
    run,
    stop_worker,
    wait_until,
    worker_process,
)

P = 3
NAMES = ["Ada", "Bob", "Cyd", "Dee", "Eve", "Fox", "Gus", "Hal", "Ivy", "Jon", "Kay", "Lou", "Max", "Ned"]


def _partition_of_name(name: str) -> int:
    return zlib.crc32(names.skeleton(name).encode()) % P


def _one_per_partition() -> list[str]:
    """A name of each partition, in partition order."""
    found: dict[int, str] = {}
    for name in NAMES:
        found.setdefault(_partition_of_name(name), name)
    assert sorted(found) == list(range(P))
    return [found[p] for p in range(P)]


@pytest.fixture
def spread_config(redis_server, tag) -> HostConfig:
    return HostConfig(
        redis_url=redis_server.url, tag=tag, operator_token=OPERATOR, partitions=P, sample_every_s=0.2
    )


@pytest.fixture
def spread_host(serve_app, spread_config) -> Served:
    return serve_app(spread_config)


@pytest.fixture
def spread_worker(redis_server, tag) -> Iterator[Any]:
    process = worker_process(redis_server.url, tag, partitions=P)
    yield process
    stop_worker(process)


def _join(host: Served, name: str) -> dict[str, Any]:
    with host.client() as anon:
        reply = anon.post("/api/players", json={"name": name})
    assert reply.status_code == 201, reply.text
    body: dict[str, Any] = reply.json()
    return body


def _tags(tag: str) -> list[str]:
    return partition_tags(tag, P)


def test_a_player_joins_in_their_names_partition_and_every_route_finds_it(spread_host, sync_redis, tag):
    """The player, their token and their recovery code are kept in the partition of their name (and
    nowhere else); /api/me, the wallet, the token's rotation and the recovery all find them there."""
    for p, name in enumerate(_one_per_partition()):
        joined = _join(spread_host, name)
        player_id, token, code = joined["player_id"], joined["token"], joined["recovery_code"]
        assert partition_of(player_id, P) == p
        assert placement.partition_of_digest(players.token_digest(token), P) == p
        assert placement.partition_of_digest(recovery.code_digest(code), P) == p
        held = [sync_redis.exists(GameKeys(t).player(player_id)) for t in _tags(tag)]
        assert held == [int(i == p) for i in range(P)]
        with spread_host.client(token) as me:
            assert me.get("/api/me").json()["name"] == name
            assert me.get("/api/wallet").status_code == 200
            rotated = me.post("/api/me/token")
            assert rotated.status_code == 200, rotated.text
            fresh = rotated.json()["token"]
            assert placement.partition_of_digest(players.token_digest(fresh), P) == p
            assert me.get("/api/me").status_code == 401  # the old token is revoked
        with spread_host.client(fresh) as me:
            assert me.get("/api/me").json()["player_id"] == player_id
        with spread_host.client() as anon:
            recovered = anon.post("/api/recover", json={"code": code, "name": name})
            assert recovered.status_code == 200, recovered.text
            assert recovered.json()["player_id"] == player_id
            assert anon.post("/api/recover", json={"code": "not a code"}).status_code == 400


def test_a_look_alike_name_is_taken_across_partitions_over_http(spread_host):
    _join(spread_host, "Ada")
    with spread_host.client() as anon:
        reply = anon.post("/api/players", json={"name": "ADA"})
    assert reply.status_code == 409, reply.text
    assert error_code(reply) == "name_taken"


def test_guesses_of_players_in_every_partition_are_scored_once_and_the_board_is_the_whole_games(
    spread_host, spread_worker, redis_server, tag, sync_redis
):
    """Both paths (the one-call POST and the routes' with an Idempotency-Key) admit in the player's
    partition; the spread worker scores each once; the host's board is the ranking of every partition's
    records (as spread.read_board reads it), the stats count every partition's jobs."""
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
        for t in _tags(tag):  # written to every partition
            assert sync_redis.exists(GameKeys(t).round(round_id)) == 1
        secret = json.loads(sync_redis.get(GameKeys(_tags(tag)[0]).secret(round_id)))
        players_of: dict[str, str] = {}
        jobs: list[tuple[str, str]] = []
        for p, name in enumerate(_one_per_partition()):
            joined = _join(spread_host, name)
            players_of[joined["player_id"]] = name
            with spread_host.client(joined["token"]) as me:
                path = f"/api/rounds/{round_id}/guesses"
                guesses = [FRUIT[p:] + FRUIT[:p], secret] if p == 1 else [FRUIT[p:] + FRUIT[:p]] * 2
                for i, guess in enumerate(guesses):
                    headers = {"Idempotency-Key": f"k{i}"} if i == 0 else {}
                    reply = me.post(path, json={"guess": guess[:6]}, headers=headers)
                    assert reply.status_code == 202, reply.text
                    jobs.append((joined["player_id"], reply.json()["job_id"]))
                again = me.post(path, json={"guess": guesses[0][:6]}, headers={"Idempotency-Key": "k0"})
                assert again.json()["job_id"] == jobs[-2][1]  # the retry answers the same job
        for player_id, job in jobs:
            t = _tags(tag)[partition_of(player_id, P)]
            assert sync_redis.exists(Keyspace(t).job(job)) == 1

        def all_scored() -> bool:
            return all(operator.get(f"/api/jobs/{job}").json()["scored_count"] == 1 for _, job in jobs)

        wait_until(all_scored, what="every guess scored once")
        board = operator.get(f"/api/rounds/{round_id}/leaderboard").json()["entries"]

        async def merged() -> list[Any]:
            async with SpreadGame.from_url(redis_server.url, tag, P) as game:
                return await spread.read_board(game, round_id, 50)

        expected = run(merged())
        assert [(e["player_id"], e["rank"]) for e in board] == [(e.standing.player, e.rank) for e in expected]
        assert {e["player_id"] for e in board} == set(players_of)
        assert board[0]["name"] == _one_per_partition()[1]  # the solver ranks first, from partition 1
        stats = operator.get("/api/operator/stats").json()
        assert stats["counters"]["admitted"] == len(jobs)
        assert stats["counters"]["completed"] == len(jobs)


def test_a_players_own_routes_and_jobs_are_theirs_alone_in_any_partition(spread_host):
    """Another player's job is 404 whichever partition it is in; the operator sees any."""
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
        first, second = _one_per_partition()[:2]
        a, b = _join(spread_host, first), _join(spread_host, second)
        with spread_host.client(a["token"]) as ada, spread_host.client(b["token"]) as bob:
            job = ada.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]}).json()["job_id"]
            assert ada.get(f"/api/jobs/{job}").status_code == 200
            assert bob.get(f"/api/jobs/{job}").status_code == 404
            assert operator.get(f"/api/jobs/{job}").json()["lane"] == a["player_id"]
            mine = ada.get(f"/api/rounds/{round_id}/guesses").json()["guesses"]
            assert [g["job_id"] for g in mine] == [job]
            assert bob.get(f"/api/rounds/{round_id}/guesses").json()["guesses"] == []


def test_the_event_stream_carries_a_players_scored_guesses_from_their_partition(spread_host, spread_worker):
    """The hub follows the round's stream in every partition: a player of the last partition gets their
    ``scored`` event and the merged leaderboard."""
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
    joined = _join(spread_host, _one_per_partition()[-1])
    events: list[str] = []
    ready = threading.Event()
    with spread_host.client(joined["token"]) as me:
        ticket = me.post("/api/events/ticket", json={"round_id": round_id}).json()["ticket"]

        def listen() -> None:
            with (
                httpx.Client(base_url=spread_host.url, timeout=30) as client,
                client.stream("GET", f"/api/events?ticket={ticket}") as stream,
            ):
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        events.append(line.removeprefix("event: "))
                        ready.set()
                        if "leaderboard" in events and "scored" in events:
                            return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert ready.wait(15), "no hello"
        assert me.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]}).status_code == 202
        listener.join(30)
    assert "scored" in events, events
    assert "leaderboard" in events, events


def test_the_operators_close_closes_the_round_in_every_partition(spread_host, sync_redis, tag):
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
        closed = operator.post(f"/api/operator/rounds/{round_id}/close")
        assert closed.status_code == 200, closed.text
        for t in _tags(tag):
            assert sync_redis.hget(GameKeys(t).round(round_id), "status") == b"closed"
        joined = _join(spread_host, _one_per_partition()[2])
        with spread_host.client(joined["token"]) as me:
            refused = me.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]})
        assert refused.status_code == 409, refused.text


def test_a_spread_host_of_another_partition_count_does_not_start(spread_config):
    """Each partition records i/P at the first start: a host of another P stops at its startup."""

    async def start(config: HostConfig) -> None:
        app = create_app(config)
        async with app.router.lifespan_context(app):
            pass

    run(start(spread_config))
    with pytest.raises(InvalidInput, match="3 partitions"):
        run(start(dataclasses.replace(spread_config, partitions=4)))


def test_a_host_refuses_a_bad_partition_count(redis_server, tag):
    for bad in (0, 1025, True):
        with pytest.raises(InvalidOption):
            HostConfig(redis_url=redis_server.url, tag=tag, partitions=bad)


def test_the_keys_of_a_spread_host_stay_in_their_partitions_tags(spread_host, sync_redis, tag):
    """Nothing of the spread game is written under the bare tag (a key outside every partition would be
    a slot the partitions do not own, on a cluster)."""
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
    for name in _one_per_partition():
        joined = _join(spread_host, name)
        with spread_host.client(joined["token"]) as me:
            me.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[:6]})
    assert list(sync_redis.scan_iter(match=f"*{{{tag}}}*")) == []


def test_a_closed_rounds_whole_summary_reaches_every_partitions_streams_and_the_history(
    spread_host, spread_worker
):
    """The worker concludes the round in every partition and writes the whole game's summary: a player
    of the last partition gets it as the ``closed`` event (the secret, the board with every partition's
    players), and /api/history lists it."""
    with spread_host.client(OPERATOR) as operator:
        round_id = open_round(operator)["round_id"]
        joined = [_join(spread_host, name) for name in _one_per_partition()]
        for p, player in enumerate(joined):
            with spread_host.client(player["token"]) as me:
                guess = {"guess": (FRUIT[p:] + FRUIT[:p])[:6]}
                assert me.post(f"/api/rounds/{round_id}/guesses", json=guess).status_code == 202
        last = joined[-1]
        closed: list[dict[str, Any]] = []
        ready = threading.Event()
        with spread_host.client(last["token"]) as me:
            ticket = me.post("/api/events/ticket", json={"round_id": round_id}).json()["ticket"]

        def listen() -> None:
            kind = ""
            with (
                httpx.Client(base_url=spread_host.url, timeout=60) as client,
                client.stream("GET", f"/api/events?ticket={ticket}") as stream,
            ):
                for line in stream.iter_lines():
                    ready.set()
                    if line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: ") and kind == "closed":
                        closed.append(json.loads(line.removeprefix("data: ")))
                        return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert ready.wait(15), "no hello"
        assert operator.post(f"/api/operator/rounds/{round_id}/close").status_code == 200
        listener.join(60)
        assert closed, "no closed event"
        summary = closed[0]
        assert summary["round_id"] == round_id
        assert summary["secret"]
        assert {entry["player_id"] for entry in summary["winners"]} == {p["player_id"] for p in joined}
        listed = operator.get("/api/history").json()["rounds"]
        assert [s["round_id"] for s in listed] == [round_id]
        assert listed[0]["guesses"] == len(joined)
