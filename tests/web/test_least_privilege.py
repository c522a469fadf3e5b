"""Least privilege by Redis ACL (:mod:`codemojex.access`): on a Redis with the game's users (from a
redis.conf, as the embedded one of ``make run``), the web host's user cannot read or write a secret by
any command or script, yet the whole game works through a host on that user, with the operator's open
and close run by the score worker on its own user; and after a Redis restart (script cache empty) the
host answers 503 until the worker has loaded the scripts again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import redis

from codemojex import access, history, retention, rounds, schedule
from codemojex.errors import ScriptError
from codemojex.game import Game
from codemojex.keys import GameKeys
from codemojex.upkeep import Upkeep
from codemojex.web import HostConfig
from tests.support.acl import Acl, admin_round
from tests.support.web import FRUIT, OPERATOR, open_round, stop_worker, wait_until, worker_process

SAY_SECRET = "return redis.call('GET', KEYS[1])"


REFUSALS = ("no permissions", "can't access", "unknown command", "DEBUG command not allowed")


def _refused(client: redis.Redis, *args: Any) -> str:
    """The refusal of ``args``: NOPERM, or a script stopped by the ACL at its command."""
    with pytest.raises(redis.ResponseError) as refusal:
        client.execute_command(*args)
    text = str(refusal.value)
    assert isinstance(refusal.value, redis.exceptions.NoPermissionError) or any(
        words in text for words in REFUSALS
    ), text
    return text


def test_the_hosts_user_cannot_read_or_write_a_secret_by_any_command_or_script(acl):
    round_id, secret = admin_round(acl, FRUIT)
    keys = GameKeys(acl.tag)
    key = keys.secret(round_id)
    admin, host = acl.client(access.ADMIN), acl.client(access.HOST)
    try:
        assert host.hgetall(keys.round(round_id))  # its own keys it reads (the test can fail)
        assert host.get(keys.revealed(round_id)) is None  # nothing revealed while open
        # A script in the cache that reads the secret, by its key and by a name it builds itself.
        by_key = admin.script_load(SAY_SECRET)
        by_name = admin.script_load(f"return redis.call('GET', '{key}')")
        admin.rpush(keys.prefix + "list", "1")
        attacks: list[tuple[Any, ...]] = [
            ("GET", key),
            ("SET", key, "[]"),
            ("DEL", key),
            ("EXISTS", key),
            ("TYPE", key),
            ("DUMP", key),
            ("RESTORE", key, 0, b"x", "REPLACE"),
            ("OBJECT", "ENCODING", key),
            ("RENAME", key, keys.prefix + "stolen"),
            ("COPY", key, keys.prefix + "stolen"),
            ("HGETALL", key),
            ("GETRANGE", key, 0, -1),
            ("SCAN", 0, "MATCH", "*secret*"),
            ("KEYS", "*"),
            ("SORT", keys.prefix + "list", "BY", "nosort", "GET", key[:-1] + "*"),
            ("EVAL", SAY_SECRET, 1, key),
            ("EVAL", "return 1", 0),
            ("EVALSHA", by_key, 1, key),
            ("EVALSHA", by_name, 0),
            ("SCRIPT", "LOAD", SAY_SECRET),
            ("SCRIPT", "FLUSH"),
            ("FUNCTION", "LIST"),
            ("MODULE", "LIST"),
            ("CONFIG", "GET", "*"),
            ("CONFIG", "SET", "dir", "/tmp"),
            ("DEBUG", "OBJECT", key),
            ("MIGRATE", "127.0.0.1", 1, key, 0, 1000),
            ("FLUSHALL",),
            ("FLUSHDB",),
            ("SWAPDB", 0, 1),
            ("SELECT", 1),
            ("MOVE", keys.round(round_id), 1),
            ("ACL", "LIST"),
            ("ACL", "SETUSER", access.user_name(access.HOST, acl.tag), "~*"),
            ("SUBSCRIBE", "x"),
            ("SHUTDOWN", "NOSAVE"),
        ]
        for attack in attacks:
            assert json.dumps(secret, ensure_ascii=False) not in _refused(host, *attack)
        with pytest.raises(redis.exceptions.NoPermissionError), host.monitor() as monitor:
            monitor.next_command()
        assert json.loads(admin.get(key)) == secret  # untouched, and the server still up
        assert admin.exists(keys.prefix + "stolen") == 0
    finally:
        host.close()
        admin.close()


def test_the_default_user_is_off_and_the_worker_may_read_secrets(acl):
    round_id, secret = admin_round(acl, FRUIT)
    anonymous = redis.Redis(port=acl.server.port)
    worker = acl.client(access.WORKER)
    try:
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        assert json.loads(worker.get(GameKeys(acl.tag).secret(round_id))) == secret
        _refused(worker, "CONFIG", "GET", "*")
        _refused(worker, "GET", "cmx:{other}:secret")  # another game's keys
    finally:
        anonymous.close()
        worker.close()


def test_the_game_works_through_a_host_on_its_user_and_recovers_after_a_restart(acl, serve_app, join):
    host_config = HostConfig(
        redis_url=acl.url(access.HOST),
        tag=acl.tag,
        operator_token=OPERATOR,
        proof=False,
        sample_every_s=0.2,
        rounds_by_worker=True,
    )
    served = serve_app(host_config)
    with served.client() as anon:
        # A Redis whose script cache is empty, no worker yet: the host may not load them.
        early = anon.post("/api/players", json={"name": "Early"})
        assert early.status_code == 503, early.text
        assert early.headers["Retry-After"] == "1"
        worker = worker_process(acl.url(access.WORKER), acl.tag, url_in_env=True)
        try:
            cmdline = Path(f"/proc/{worker.pid}/cmdline").read_bytes()
            assert all(password.encode() not in cmdline for password in acl.passwords.values())
            wait_until(lambda: _joined(anon), what="the worker loading the scripts")
            _play(served, acl, join, anon)
            # A restart empties the script cache; without a worker the host answers 503, then recovers.
            stop_worker(worker)
            acl.server.restart()
            down = anon.post("/api/players", json={"name": "Refused"})
            assert down.status_code == 503, down.text
            assert down.headers["Retry-After"] == "1"
            worker = worker_process(acl.url(access.WORKER), acl.tag, url_in_env=True)
            wait_until(lambda: _joined(anon), what="the host recovering")
        finally:
            stop_worker(worker)


_names = iter(f"Joiner {n}" for n in range(1000))


def _joined(anon) -> bool:
    reply = anon.post("/api/players", json={"name": next(_names)})
    assert reply.status_code in (201, 503), reply.text
    return reply.status_code == 201


def _play(served, acl: Acl, join, anon) -> None:
    with served.client(OPERATOR) as operator:
        the_round = open_round(operator)  # run by the worker: the host may not write a secret
        round_id = the_round["round_id"]
        admin = acl.client(access.ADMIN)
        try:
            secret = json.loads(admin.get(GameKeys(acl.tag).secret(round_id)))
        finally:
            admin.close()
        ada_id, ada = join("Ada", on=served)
        path = f"/api/rounds/{round_id}/guesses"
        job = ada.post(path, json={"guess": secret}).json()["job_id"]
        wait_until(lambda: ada.get(f"/api/jobs/{job}").json().get("state") == "done", what="the guess scored")
        board = anon.get(f"/api/rounds/{round_id}/leaderboard").json()
        assert [entry["player_id"] for entry in board["entries"]] == [ada_id]
        ticket = ada.post("/api/events/ticket", json={"round_id": round_id})
        assert ticket.status_code == 201, ticket.text
        with anon.stream("GET", f"/api/events?ticket={ticket.json()['ticket']}") as stream:
            assert stream.status_code == 200
            assert next(stream.iter_lines()) == "event: hello"
        rotated = ada.post("/api/me/token")  # token.lua, as the host's user
        assert rotated.status_code == 200, rotated.text
        ada.headers["authorization"] = f"Bearer {rotated.json()['token']}"
        assert ada.get("/api/me").json()["player_id"] == ada_id
        code = ada.post("/api/me/recovery")  # recovery.lua, as the host's user
        assert code.status_code == 200, code.text
        recovered = anon.post("/api/recover", json={"code": code.json()["recovery_code"]})
        assert recovered.status_code == 200, recovered.text
        assert recovered.json()["player_id"] == ada_id
        assert anon.get(f"/api/rounds/{round_id}").json()["secret"] is None
        closed = operator.post(f"/api/operator/rounds/{round_id}/close")
        assert closed.status_code == 200, closed.text
        assert anon.get(f"/api/rounds/{round_id}").json()["secret"] == secret
        again = operator.post(f"/api/operator/rounds/{round_id}/close")
        assert again.status_code == 409, again.text  # the worker's typed answer, as a direct call's
        bad = operator.post("/api/operator/rounds", json={"keyboard": ["🍎"]})
        assert bad.status_code == 400, bad.text
        for path in ("/api/operator/stats", "/api/operator/leases", "/api/operator/dead", "/api/me"):
            client = ada if path == "/api/me" else operator
            assert client.get(path).status_code == 200, path
        assert ada.get("/api/wallet").status_code == 200
        assert anon.get("/metrics").status_code == 200


def test_a_round_closed_by_its_close_time_is_revealed_by_the_worker_and_shown_by_the_host(acl):
    async def scenario() -> None:
        async with (
            Game.from_url(acl.url(access.WORKER), acl.tag) as worker,
            Game.from_url(acl.url(access.HOST), acl.tag) as host,
        ):
            await access.load_scripts(worker.redis)
            opened = await rounds.open_round(worker, keyboard=FRUIT, duration_s=1)
            secret = await rounds.read_secret(worker, opened.id)
            assert await rounds.read_revealed(host, [opened.id]) == [None]
            while (await rounds.get_round(host, opened.id)).status_at(
                await rounds.server_ms(host)
            ) is not rounds.RoundStatus.CLOSED:
                await asyncio.sleep(0.1)
            assert await rounds.read_revealed(host, [opened.id]) == [None]  # nobody closed it by a call
            assert await rounds.reveal_closed(worker) == [opened.id]
            assert await rounds.reveal_closed(worker) == []  # once
            assert await rounds.read_revealed(host, [opened.id]) == [secret]
            with pytest.raises(ScriptError, match="no permissions"):  # the host never reads it itself
                await rounds.read_secret(host, opened.id)

    asyncio.run(scenario())


def test_the_rounds_lifecycle_runs_on_the_workers_user_and_the_host_reads_what_it_serves(acl):
    """The worker's user keeps the schedule, concludes and purges (the secret's key); the host's user
    reads the summaries, the history and the lobby, and can neither open a scheduled round nor purge one
    (refused before any change)."""

    async def scenario() -> None:
        async with (
            Game.from_url(acl.url(access.WORKER), acl.tag) as worker,
            Game.from_url(acl.url(access.HOST), acl.tag) as host,
        ):
            await access.load_scripts(worker.redis)
            settings = schedule.RoundSettings(on=True, duration_s=600, retention_s=0)
            await schedule.write_settings(worker, settings)
            with pytest.raises(ScriptError, match=r"no permissions|can't access"):
                await schedule.step(host, settings)  # it would write a secret
            assert await rounds.list_rounds(host) == []
            opened = await schedule.step(worker, settings)
            assert opened is not None
            await rounds.close_round(worker, opened)
            secret = await rounds.read_secret(worker, opened)
            await Upkeep(worker, every_s=1).rounds_pass()
            summary = await history.read_summary(host, opened)
            assert summary is not None
            assert summary.secret == secret
            assert [s.round_id for s in await history.list_history(host)] == [opened]
            second = await schedule.scheduled_round(host)
            assert second not in (None, opened)
            await rounds.close_round(worker, second)
            await history.conclude_round(worker, second)
            with pytest.raises(ScriptError, match="no permissions"):
                await retention.purge(host, retention_s=0)
            assert await rounds.read_secret(worker, second)  # nothing purged by the refused call
            assert await retention.purge(worker, retention_s=0) == [second]
            assert await history.read_summary(host, second) is not None

    asyncio.run(scenario())
