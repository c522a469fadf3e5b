"""The ``codemojex`` play and operator commands on a spread game (``--partitions P``,
:mod:`codemojex.cli.spread_commands`), as subprocesses against a real server with a real ``codemojex
worker --partitions 3``: each command finds its data in the partition that holds it, and answers as on
one game."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codemojex.keys import GameKeys
from echomq.partitions import partition_of
from tests.integration.test_codemojex_cli import KEYBOARD, _env, ok, other_than, refused, run_codemojex
from tests.support.workers import ROOT

P = "3"


@pytest.fixture
def spread_cmx(redis_server, tag):
    """``codemojex --tag <tag> ARGS --partitions 3``."""

    def run(*args: str, partitions: str = P) -> subprocess.CompletedProcess[str]:
        return run_codemojex(redis_server.url, "--tag", tag, "--json", *args, "--partitions", partitions)

    return run


@pytest.fixture
def spread_worker(redis_server, tag, tmp_path):
    log = (tmp_path / "worker.err").open("w", encoding="utf-8")
    argv = [sys.executable, "-m", "codemojex.cli", "--tag", tag, "worker", "--partitions", P]
    proc = subprocess.Popen(argv, cwd=ROOT, env=_env(redis_server.url), stdout=subprocess.DEVNULL, stderr=log)
    yield proc
    proc.terminate()
    proc.wait(30)
    log.close()


def _secret(sync_redis, tag: str, round_id: str) -> list[str]:
    raw = sync_redis.get(GameKeys(f"{tag}.0").secret(round_id))
    assert raw is not None
    return json.loads(raw)


@pytest.mark.slow
def test_a_whole_play_on_a_spread_game_through_the_cli(spread_cmx, spread_worker, sync_redis, tag):
    opened = ok(spread_cmx("round", "open", "--keyboard", KEYBOARD))
    round_id = opened["id"]
    assert opened["partitions"] == 3
    for i in range(3):  # the round is in every partition
        assert sync_redis.exists(GameKeys(f"{tag}.{i}").round(round_id)) == 1
    secret = _secret(sync_redis, tag, round_id)
    people = [ok(spread_cmx("player", "new", f"Spread {i}")) for i in range(6)]
    homes = {partition_of(person["id"], 3) for person in people}
    assert len(homes) > 1  # the test can fail: players in more than one partition
    for person in people:
        assert sync_redis.exists(GameKeys(f"{tag}.{partition_of(person['id'], 3)}").player(person["id"])) == 1
        assert person["recovery_code"]
    wrong = [other_than(secret[0]), other_than(secret[1]), *secret[2:]]
    for person in people:
        out = ok(spread_cmx("guess", round_id, person["id"], *wrong, "--wait", "30"))
        assert (out["outcome"], out["state"]) == ("admitted", "scored")
        assert out["feedback"]["hits"] == 4
    solver = people[-1]["id"]
    assert ok(spread_cmx("lock", round_id, solver, "3"))["key"] == secret[2]
    solved = ok(spread_cmx("guess", round_id, solver, *secret, "--wait", "30"))
    assert solved["feedback"]["solved"] is True
    listed = ok(spread_cmx("guesses", round_id, solver))
    assert [g["guess"] for g in listed["guesses"]] == [wrong, secret]
    board = ok(spread_cmx("board", round_id))
    assert board[0]["player"] == solver  # the merged board: the solver first
    assert sorted(entry["player"] for entry in board) == sorted(p["id"] for p in people)
    assert ok(spread_cmx("board", round_id, "--rebuild")) == board
    purse = ok(spread_cmx("wallet", solver))
    assert (purse["reconciles"], purse["balances"]["coin"]) == (True, 75)
    shown = ok(spread_cmx("round", "show", round_id))
    assert (shown["players"], shown["secret"], shown["partitions"]) == (6, None, 3)
    assert round_id in [r["id"] for r in ok(spread_cmx("round", "list"))]
    closed = ok(spread_cmx("round", "close", round_id))
    assert closed["secret"] == secret  # closed in every partition: shown
    late = refused(spread_cmx("guess", round_id, people[0]["id"], *secret))
    assert late["refusal"] == "round_closed"
    assert ok(spread_cmx("refund")) == {"checked": 0, "refunded": [], "outcomes": {}}


def test_a_spread_command_with_another_p_than_the_games_is_refused_before_it_runs(
    spread_cmx, sync_redis, tag
):
    opened = ok(spread_cmx("round", "open", "--keyboard", KEYBOARD))
    out = spread_cmx("player", "new", "Other P", partitions="2")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "partition" in out.stderr
    assert "Traceback" not in out.stderr
    for i in range(3):
        assert list(sync_redis.scan_iter(match=GameKeys(f"{tag}.{i}").prefix + "player:*")) == []
    assert ok(spread_cmx("round", "show", opened["id"]))["status"] == "open"


def test_a_refund_of_a_job_no_partition_holds_answers_not_dead(spread_cmx):
    out = ok(spread_cmx("refund", "JOB00T4DG8QRD7KCENZJ2KN508"))
    assert out == {"checked": 1, "refunded": [], "outcomes": {"JOB00T4DG8QRD7KCENZJ2KN508": "not_dead"}}
