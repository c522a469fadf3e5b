"""Least privilege on a spread game (:mod:`codemojex.access` with ``partitions``, :mod:`codemojex.
spread_jobs`): the host's user reaches no partition's secret (nor a round's draft), yet the whole game
works through a host on that user, the operator's open and close run by ``codemojex worker --partitions
P`` on its own user, written to every partition; and an open redelivered after a worker died midway
opens the same round (the same keyboard, secret and instants) in the partitions not written yet."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator

import pytest
import redis

from codemojex import access, names, rounds, spread_jobs
from codemojex.keys import GameKeys
from codemojex.spread import SpreadGame
from codemojex.web import HostConfig
from echomq import Job, ids
from echomq.partitions import partition_of, partition_tags
from tests.support.acl import Acl
from tests.support.web import FRUIT, OPERATOR, stop_worker, wait_until, worker_process

P = 3


@pytest.fixture
def spread_acl(tmp_path, tag) -> Iterator[Acl]:
    server = Acl(tmp_path, tag, partitions=P)
    server.server.start()
    with redis.Redis.from_url(server.url(access.ADMIN)) as admin:
        admin.ping()
    yield server
    server.server.close()


def _names() -> list[str]:
    found: dict[int, str] = {}
    for name in ("Ada", "Bob", "Cyd", "Dee", "Eve", "Fox", "Gus", "Hal", "Ivy", "Jon"):
        found.setdefault(zlib.crc32(names.skeleton(name).encode()) % P, name)
    return [found[p] for p in range(P)]


def test_a_spread_game_is_played_through_a_host_that_reaches_no_secret(serve_app, spread_acl, tag):
    worker = worker_process(spread_acl.url(access.WORKER), tag, partitions=P, url_in_env=True)
    host = serve_app(
        HostConfig(
            redis_url=spread_acl.url(access.HOST),
            tag=tag,
            partitions=P,
            rounds_by_worker=True,
            operator_token=OPERATOR,
        )
    )
    try:
        with host.client(OPERATOR) as operator, spread_acl.client(access.HOST) as as_host:
            wait_until(lambda: operator.get("/healthz").status_code == 200, what="the host up")
            round_id = wait_until(
                lambda: (
                    operator.post("/api/operator/rounds", json={"keyboard": FRUIT}).json().get("round_id")
                ),
                what="the worker opened a round (its scripts loaded)",
            )
            secrets = []
            for t in partition_tags(tag, P):
                keys = GameKeys(t)
                assert as_host.hgetall(keys.round(round_id))  # its own keys it reads
                with pytest.raises(redis.exceptions.NoPermissionError):
                    as_host.get(keys.secret(round_id))
                with spread_acl.client(access.ADMIN) as admin:
                    secrets.append(admin.get(keys.secret(round_id)))
            assert len(set(secrets)) == 1  # one secret in every partition
            with pytest.raises(redis.exceptions.NoPermissionError):
                as_host.get(f"{GameKeys(partition_tags(tag, P)[0]).secret_prefix}draft:{round_id}")
            jobs = []
            for p, name in enumerate(_names()):
                with host.client() as anon:
                    joined = anon.post("/api/players", json={"name": name}).json()
                assert partition_of(joined["player_id"], P) == p
                with host.client(joined["token"]) as me:
                    reply = me.post(f"/api/rounds/{round_id}/guesses", json={"guess": FRUIT[p : p + 6]})
                    assert reply.status_code == 202, reply.text
                    jobs.append(reply.json()["job_id"])
            wait_until(
                lambda: all(operator.get(f"/api/jobs/{job}").json()["scored_count"] == 1 for job in jobs),
                what="every guess scored",
            )
            closed = operator.post(f"/api/operator/rounds/{round_id}/close")
            assert closed.status_code == 200, closed.text
            for t in partition_tags(tag, P):
                assert as_host.hget(GameKeys(t).round(round_id), "status") == b"closed"
    finally:
        stop_worker(worker)


async def test_an_open_redelivered_after_a_crash_midway_opens_the_same_round_everywhere(redis_server, tag):
    """The first delivery drew the round's draft and opened it in the first partition, then died: the
    redelivery opens the draft's round in the others, never a second secret."""
    async with SpreadGame.from_url(redis_server.url, tag, P) as game:
        round_id = ids.mint("RND")
        command = {"op": "open", "round": round_id, "spec": {"size": 8, "duration_s": 60}}
        job = ids.mint("JOB")
        await game.pbus.enqueue(job, lane="operator", payload=json.dumps(command).encode())
        [claim] = (await game.pbus.claim_batch(1)).jobs
        draft = await spread_jobs._draft(game, round_id, command["spec"])  # the first delivery, then ...
        await rounds.open_round(
            game.games[0], keyboard=draft["keyboard"], secret=draft["secret"], round_id=round_id,
            opens_at_ms=draft["opens_at_ms"], duration_s=60,
        )  # fmt: skip
        result = json.loads(await spread_jobs.SpreadScoreWorker(game).handle(Job(claim)))  # ... redelivered
        assert result == {"ok": {"round_id": round_id}}
        opened = [await rounds.get_round(part, round_id) for part in game.games]
        assert {tuple(r.keyboard.keys) for r in opened} == {tuple(draft["keyboard"])}
        assert {r.opens_ms for r in opened} == {draft["opens_at_ms"]}
        secrets = {tuple(await rounds.read_secret(part, round_id)) for part in game.games}
        assert secrets == {tuple(draft["secret"])}
        again = json.loads(await spread_jobs.SpreadScoreWorker(game).handle(Job(claim)))  # once more
        assert again == result
        assert [await rounds.list_rounds(part, 10) for part in game.games] == [[r] for r in opened]


async def test_a_bad_open_command_answers_its_error_and_opens_nothing(redis_server, tag):
    async with SpreadGame.from_url(redis_server.url, tag, P) as game:
        round_id = ids.mint("RND")
        command = {"op": "open", "round": round_id, "spec": {"keyboard": ["x"]}}
        await game.pbus.enqueue(ids.mint("JOB"), lane="operator", payload=json.dumps(command).encode())
        [claim] = (await game.pbus.claim_batch(1)).jobs
        result = json.loads(await spread_jobs.SpreadScoreWorker(game).handle(Job(claim)))
        assert result["error"]["code"] in ("invalid_keyboard", "invalid_input")
        for part in game.games:
            assert await part.redis.exists(part.keys.round(round_id)) == 0
