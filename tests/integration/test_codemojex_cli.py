"""The ``codemojex`` command as a subprocess against a real server: a whole play, refusals, bad input, the
worker's start and graceful stop.

The CLI cannot choose a round's secret, so a test that solves reads it from Redis, as only the score
worker would. Nothing here asserts on timing: waits poll with deadlines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemojex.engine import score
from codemojex.keys import GameKeys
from echomq import ids
from echomq.testing.server import free_port
from tests.support.workers import ROOT

KEYBOARD = "🍎🍌🍇🍓🍒🍑🥝🍋"
KEYS = ["🍎", "🍌", "🍇", "🍓", "🍒", "🍑", "🥝", "🍋"]
# Well-formed, never opened / never registered; fixed (not minted) so that every pytest-xdist worker
# collects the same parametrized test ids.
SOME_ROUND = "RND00T4DG8QRD7KCENZJ2KN506"
SOME_PLAYER = "PLR00T4DG8QRD7KCENZJ2KN507"


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CODEMOJEX_FAULTS")}
    env.update(REDIS_URL=url, PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    return env


def run_codemojex(url: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``python -m codemojex.cli ARGS`` to completion, with REDIS_URL=url."""
    return subprocess.run(
        [sys.executable, "-m", "codemojex.cli", *args],
        cwd=ROOT,
        env=_env(url),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def cmx(redis_server, tag):
    """Run ``codemojex --tag <tag> ARGS`` against the session server."""

    def run(*args, timeout=60):
        return run_codemojex(redis_server.url, "--tag", tag, *args, timeout=timeout)

    return run


def ok(out: subprocess.CompletedProcess[str]):
    """The JSON document of a command that succeeded."""
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


def refused(out: subprocess.CompletedProcess[str]):
    """The JSON document of a command that was refused (exit 1, the outcome on stdout)."""
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    return json.loads(out.stdout)


def one_error_line(out: subprocess.CompletedProcess[str], code: int) -> str:
    """The one stderr line of a command that failed with exit ``code`` and printed nothing on stdout."""
    assert out.returncode == code, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("codemojex: error: "), lines[0]
    return lines[0]


def open_round(cmx, *args: str) -> dict:
    return ok(cmx("--json", "round", "open", "--keyboard", KEYBOARD, *args))


def new_player(cmx, name: str = "Ada") -> dict:
    return ok(cmx("--json", "player", "new", name))


def read_secret(sync_redis, tag: str, round_id: str) -> list[str]:
    """The round's secret, straight from Redis (key ``cmx:{tag}:secret:RND``, a JSON list)."""
    raw = sync_redis.get(GameKeys(tag).secret(round_id))
    assert raw is not None
    return json.loads(raw)


def other_than(key: str) -> str:
    return next(k for k in KEYS if k != key)


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[str]
    stdout: Path
    stderr: Path

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8")

    def output(self) -> str:
        return self.stdout.read_text(encoding="utf-8")

    def wait_for_log(self, text: str, timeout: float = 30) -> None:
        """Poll the worker's log until it holds ``text``; fail if the worker exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} in the worker's log within {timeout} s: {self.log()}")
            time.sleep(0.05)

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, and wait for the graceful exit; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


@pytest.fixture
def start_worker(redis_server, tag, tmp_path) -> Iterator:
    """Start ``codemojex worker`` (logs to a file, so a test can wait for its start line); every worker
    started is stopped at the end, killed if SIGTERM did not do it."""
    started: list[tuple[subprocess.Popen[str], list]] = []

    def start(*args: str) -> WorkerProcess:
        number = len(started)
        out_path, err_path = tmp_path / f"worker{number}.out", tmp_path / f"worker{number}.err"
        out, err = out_path.open("w", encoding="utf-8"), err_path.open("w", encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "codemojex.cli", "--tag", tag, *args, "worker", "--sweep-every", "1"],
            cwd=ROOT,
            env=_env(redis_server.url),
            stdout=out,
            stderr=err,
            text=True,
        )
        started.append((proc, [out, err]))
        worker = WorkerProcess(proc, out_path, err_path)
        worker.wait_for_log("event=worker.started")
        return worker

    yield start
    for proc, files in started:
        try:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        finally:
            for file in files:
                file.close()


@pytest.mark.slow
def test_a_whole_play_through_the_cli(cmx, start_worker, sync_redis, tag):
    """Open a round, register, guess (feedback per position), retry with --job, lock a proven hit, solve
    with a blank the lock fills, read the board, the guesses and the wallet, close and reveal."""
    worker = start_worker()
    opened = open_round(cmx)
    round_id = opened["id"]
    assert opened["status"] == "open"
    assert opened["keyboard"] == KEYS
    assert [(p["currency"], p["amount"]) for p in opened["prices"]] == [("ticket", 1), ("coin", 5)]
    assert "secret" not in opened
    player = new_player(cmx, "Ada")
    assert (player["wallet"], player["allowance"]) == ({}, {"ticket": 3, "coin": 50})  # no sign-up grant
    player_id = player["id"]
    secret = read_secret(sync_redis, tag, round_id)

    # A first guess, typed apart, with the caller's job id: right at position 1, wrong at position 2.
    first = [secret[0], other_than(secret[1]), *secret[2:]]
    job = ids.mint("JOB")
    out = ok(cmx("--json", "guess", round_id, player_id, *first, "--job", job, "--wait", "30"))
    assert (out["outcome"], out["job"], out["guess"]) == ("admitted", job, first)
    assert out["charged"] == {"currency": "ticket", "amount": 1}
    assert out["state"] == "scored"
    expected = score(secret, first)
    feedback = out["feedback"]
    assert feedback["code"] == expected.code()
    assert feedback["marks"] == [mark.value for mark in expected.marks]
    assert (feedback["hits"], feedback["nears"], feedback["solved"]) == (expected.hits, expected.nears, False)
    assert feedback["marks"][0] == "hit"
    assert feedback["marks"][1] != "hit"

    # The same job again is a duplicate: nothing charged twice, the original charge reported.
    again = ok(cmx("--json", "guess", round_id, player_id, *first, "--job", job))
    assert (again["outcome"], again["job"]) == ("duplicate", job)
    assert again["charged"] == {"currency": "ticket", "amount": 1}

    # Position 2 is not proven (the guess missed it); position 1 is.
    line = one_error_line(cmx("lock", round_id, player_id, "2"), 1)
    assert "not_proven" in line
    assert "position 2 " in line
    locked = ok(cmx("lock", round_id, player_id, "1", "--json"))  # --json after the command, too
    assert (locked["position"], locked["key"]) == (1, secret[0])

    # A readable guess, typed together: the six emoji over their squares.
    second = [*secret[:2], other_than(secret[2]), *secret[3:]]
    text_out = cmx("guess", round_id, player_id, "".join(second), "--wait", "30")
    assert text_out.returncode == 0, text_out.stderr
    assert text_out.stdout.startswith("admitted")
    squares = {"hit": "🟩", "near": "🟨", "miss": "⬜"}
    marks = " ".join(squares[mark.value] for mark in score(secret, second).marks)
    assert f"  {' '.join(second)}\n  {marks}\n" in text_out.stdout
    assert "charged 1 ticket" in text_out.stdout

    # Solve with a blank at the locked position.
    solved = ok(cmx("--json", "guess", round_id, player_id, "_" + "".join(secret[1:]), "--wait", "30"))
    assert solved["guess"] == secret
    assert solved["feedback"]["solved"] is True
    assert solved["feedback"]["attempt"] == 3
    assert solved["charged"] == {"currency": "ticket", "amount": 1}

    listed = ok(cmx("--json", "guesses", round_id, player_id))
    assert listed["guesses"][0]["job"] == job
    assert [g["state"] for g in listed["guesses"]] == ["scored"] * 3
    assert [g["guess"] for g in listed["guesses"]] == [first, second, secret]
    assert [g["feedback"]["code"] for g in listed["guesses"]] == [
        score(secret, g).code() for g in (first, second, secret)
    ]
    assert listed["locks"] == {"1": secret[0]}
    assert listed["proven"] == {str(i + 1): key for i, key in enumerate(secret)}

    [entry] = ok(cmx("--json", "board", round_id))
    assert (entry["rank"], entry["name"], entry["player"]) == (1, "Ada", player_id)
    assert (entry["solved"], entry["best_hits"], entry["best_nears"], entry["attempts"]) == (True, 6, 0, 3)
    assert ok(cmx("--json", "board", round_id, "--rebuild")) == [entry]
    board_text = cmx("board", round_id)
    assert board_text.returncode == 0
    assert "Ada" in board_text.stdout
    assert "yes" in board_text.stdout

    purse = ok(cmx("--json", "wallet", player_id, "--ledger", "2"))
    assert purse["balances"] == {"ticket": 0, "coin": 75}  # 50 from the allowance, 25 for the solve
    assert purse["reconciles"] is True
    assert purse["problems"] == []
    # two allowances, three guesses (the duplicate charged nothing), the solve's reward
    assert purse["ledger_entries"] == 6
    assert [(e["currency"], e["delta"], e["reason"]) for e in purse["ledger"]] == [
        ("ticket", -1, "guess"),
        ("coin", 25, "reward"),
    ]
    assert "reconciles: yes" in cmx("wallet", player_id).stdout

    shown = ok(cmx("--json", "round", "show"))  # the open round, by default
    assert (shown["id"], shown["status"], shown["players"], shown["secret"]) == (round_id, "open", 1, None)
    closed = ok(cmx("--json", "round", "close", round_id))
    assert closed["secret"] == secret
    shown = ok(cmx("--json", "round", "show", round_id))
    assert (shown["status"], shown["secret"]) == ("closed", secret)
    assert round_id in [r["id"] for r in ok(cmx("--json", "round", "list"))]

    late = refused(cmx("--json", "guess", round_id, player_id, *secret))
    assert (late["outcome"], late["refusal"], late["charged"]) == ("refused", "round_closed", None)
    assert worker.terminate() == 0


def test_worker_logs_its_start_and_stops_on_sigterm_with_exit_0(start_worker, tag):
    """``codemojex worker`` logs worker.started in logfmt once ready, and SIGTERM stops it gracefully:
    exit code 0, worker.stopped logged, and with --json its counts on stdout."""
    worker = start_worker("--json")
    assert f"tag={tag}" in worker.log()
    assert worker.terminate() == 0
    log = worker.log()
    assert "event=worker.stopping" in log
    assert "event=worker.stopped" in log
    assert "Traceback" not in log
    report = json.loads(worker.output())
    assert report["tag"] == tag
    assert report["counts"]["claimed"] == 0


@pytest.mark.slow
def test_spending_the_whole_grant_then_a_guess_is_refused_for_funds(cmx):
    """The round's allowance (3 tickets, 50 coins, at the first guess) pays 13 guesses at ticket=1 else
    coin=5; the 14th is refused with insufficient_funds (exit 1, nothing charged) and the wallet still
    reconciles."""
    round_id = open_round(cmx)["id"]
    player_id = new_player(cmx)["id"]
    charges = []
    for _ in range(13):
        out = ok(cmx("--json", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑"))
        assert out["outcome"] == "admitted"
        charges.append((out["charged"]["currency"], out["charged"]["amount"]))
    assert charges == [("ticket", 1)] * 3 + [("coin", 5)] * 10
    broke = refused(cmx("--json", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑"))
    assert (broke["refusal"], broke["charged"]) == ("insufficient_funds", None)
    text = cmx("guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑")
    assert text.returncode == 1
    assert text.stdout.startswith("refused: insufficient_funds")
    purse = ok(cmx("--json", "wallet", player_id))
    assert purse["balances"] == {"ticket": 0, "coin": 0}
    assert (purse["reconciles"], purse["ledger_entries"]) == (True, 15)
    listed = ok(cmx("--json", "guesses", round_id, player_id))
    assert [g["state"] for g in listed["guesses"]] == ["queued"] * 13  # no worker runs here


def test_job_id_retries_are_duplicates_and_a_changed_guess_conflicts(cmx):
    """--job JOB twice admits once and charges once; the same JOB with another guess is refused."""
    round_id = open_round(cmx)["id"]
    player_id = new_player(cmx)["id"]
    job = ids.mint("JOB")
    first = ok(cmx("--json", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑", "--job", job))
    second = ok(cmx("--json", "guess", round_id, player_id, "🍎", "🍌", "🍇", "🍓", "🍒", "🍑", "--job", job))
    assert (first["outcome"], second["outcome"]) == ("admitted", "duplicate")
    assert first["charged"] == second["charged"] == {"currency": "ticket", "amount": 1}
    text = cmx("guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑", "--job", job)
    assert text.returncode == 0
    assert text.stdout.startswith("duplicate")
    assert job in text.stdout
    conflict = refused(cmx("--json", "guess", round_id, player_id, "🍌🍌🍇🍓🍒🍑", "--job", job))
    assert (conflict["refusal"], conflict["job"]) == ("idempotency_conflict", job)
    assert ok(cmx("--json", "wallet", player_id))["balances"] == {"ticket": 2, "coin": 50}


def test_bad_guesses_are_refusals_with_their_problem(cmx):
    """An emoji off the keyboard, or not six of them, is a refusal (exit 1) naming the problem; nothing
    is charged."""
    round_id = open_round(cmx)["id"]
    player_id = new_player(cmx)["id"]
    off = refused(cmx("--json", "guess", round_id, player_id, "🐶🍌🍇🍓🍒🍑"))
    assert (off["outcome"], off["refusal"], off["problem"]) == ("refused", "bad_guess", "off_keyboard")
    assert "🐶" in off["detail"]
    short = refused(cmx("--json", "guess", round_id, player_id, "🍎", "🍌"))
    assert (short["refusal"], short["problem"]) == ("bad_guess", "wrong_length")
    blank = refused(cmx("--json", "guess", round_id, player_id, "_🍌🍇🍓🍒🍑"))  # no lock fills it
    assert blank["problem"] == "blank"
    text = cmx("guess", round_id, player_id, "🐶🍌🍇🍓🍒🍑")
    assert text.returncode == 1
    assert text.stdout.startswith("refused: bad_guess (off_keyboard)")
    assert ok(cmx("--json", "wallet", player_id))["balances"] == {}  # refused guesses took no allowance


def test_closed_scheduled_and_limited_rounds_refuse(cmx):
    """A closed round refuses guesses (exit 1) and a second close; a round opening later refuses with
    round_not_open; a round's guess limit refuses with max_guesses."""
    player_id = new_player(cmx)["id"]
    closed_id = open_round(cmx)["id"]
    ok(cmx("round", "close", closed_id, "--json"))
    assert "round_closed" in one_error_line(cmx("round", "close", closed_id), 1)
    late = refused(cmx("--json", "guess", closed_id, player_id, "🍎🍌🍇🍓🍒🍑"))
    assert late["refusal"] == "round_closed"
    assert "round_closed" in one_error_line(cmx("lock", closed_id, player_id, "1"), 1)

    later = open_round(cmx, "--delay", "3600")
    assert later["status"] == "scheduled"
    early = refused(cmx("--json", "guess", later["id"], player_id, "🍎🍌🍇🍓🍒🍑"))
    assert early["refusal"] == "round_not_open"

    limited = open_round(cmx, "--max-guesses", "1", "--price", "coin=2", "--duration", "3600")
    assert limited["max_guesses"] == 1
    assert limited["closes_ms"] == limited["opens_ms"] + 3_600_000
    assert ok(cmx("--json", "guess", limited["id"], player_id, "🍎🍌🍇🍓🍒🍑"))["charged"] == {
        "currency": "coin",
        "amount": 2,
    }
    over = refused(cmx("--json", "guess", limited["id"], player_id, "🍎🍌🍇🍓🍒🍑"))
    assert over["refusal"] == "max_guesses"


def test_wait_without_a_worker_reports_the_guess_not_scored(cmx):
    """--wait with no worker running ends with exit 1: admitted and charged, but still queued."""
    round_id = open_round(cmx)["id"]
    player_id = new_player(cmx)["id"]
    out = refused(cmx("--json", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑", "--wait", "0.2"))
    assert (out["outcome"], out["state"], out["feedback"]) == ("admitted", "queued", None)
    assert out["charged"] == {"currency": "ticket", "amount": 1}


@pytest.mark.parametrize(
    "args",
    [
        ("round", "close", "RND123"),
        ("round", "show", SOME_PLAYER),  # a PLR where a RND belongs
        ("guess", "nope", SOME_PLAYER, "🍎🍌🍇🍓🍒🍑"),
        ("guess", SOME_ROUND, "plr00T4C5X4PHGHTKHF3F50FBR", "🍎🍌🍇🍓🍒🍑"),
        ("guess", SOME_ROUND, SOME_PLAYER, "🍎🍌🍇🍓🍒🍑", "--job", "JOBnope"),
        ("guess", SOME_ROUND, SOME_PLAYER, "🍎🍌🍇🍓🍒🍑", "--wait", "-1"),
        ("round", "open", "--price", "Coin=5"),
        ("round", "open", "--price", "coin=five"),
        ("round", "open", "--price", "coin"),
        ("round", "open", "--price", "coin=0"),
        ("round", "open", "--price", "coin=1", "--price", "coin=2"),
        ("round", "open", "--keyboard", "abc"),
        ("round", "open", "--keyboard", "🍎🍎🍌"),
        ("round", "open", "--size", "1"),
        ("round", "open", "--size", "4", "--keyboard", "🍎🍌"),
        ("round", "open", "--duration", "0"),
        ("lock", SOME_ROUND, SOME_PLAYER, "0"),
        ("lock", SOME_ROUND, SOME_PLAYER, "7"),
        ("unlock", SOME_ROUND, SOME_PLAYER, "one"),
        ("wallet", "PLR"),
        ("player", "new", ""),
        ("worker", "--concurrency", "0"),
        ("--tag", "bad tag", "round", "list"),
        ("--redis-url", "nosuch://host", "round", "list"),
        ("round",),
        (),
    ],
    ids=lambda args: " ".join(args) or "nothing",
)
def test_bad_input_exits_2_with_one_line_and_no_traceback(cmx, args):
    """Ill-formed ids, bad options, a bad keyboard or tag: exit 2, one stderr line, nothing on stdout."""
    one_error_line(cmx(*args), 2)


def test_unknown_things_exit_1(cmx, redis_server, tag):
    """A well-formed id of nothing, or no open round for `round show`, exits 1 with one line."""
    player_id = new_player(cmx)["id"]
    assert "unknown_round" in one_error_line(cmx("round", "show", SOME_ROUND), 1)
    assert "unknown_round" in one_error_line(cmx("guess", SOME_ROUND, player_id, "🍎🍌🍇🍓🍒🍑"), 1)
    assert "unknown_round" in one_error_line(cmx("board", SOME_ROUND), 1)
    assert "unknown_player" in one_error_line(cmx("wallet", SOME_PLAYER), 1)
    round_id = open_round(cmx)["id"]
    assert "unknown_player" in one_error_line(cmx("guess", round_id, SOME_PLAYER, "🍎🍌🍇🍓🍒🍑"), 1)
    assert "unknown_player" in one_error_line(cmx("guesses", round_id, SOME_PLAYER), 1)
    unlocked = cmx("--json", "unlock", round_id, player_id, "3")
    assert refused(unlocked) == {"round": round_id, "player": player_id, "position": 3, "unlocked": False}
    ok(cmx("--json", "round", "close", round_id))
    empty = run_codemojex(redis_server.url, "--tag", f"{tag}-empty", "round", "show")
    assert "not_found" in one_error_line(empty, 1)


def test_unreachable_redis_exits_1_without_showing_the_password(tag, redis_server):
    """A server nobody listens on: exit 1 and one line, which names the server but not its password;
    --redis-url overrides REDIS_URL."""
    port = free_port()
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    for args in (("round", "list"), ("player", "new", "Ada"), ("wallet", SOME_PLAYER)):
        line = one_error_line(run_codemojex(url, "--tag", tag, *args), 1)
        assert line.startswith("codemojex: error: unavailable:")
        assert line.endswith(f"(server redis://127.0.0.1:{port}/0)")
        assert "hunter2" not in line
    override = run_codemojex(redis_server.url, "--redis-url", url, "--tag", tag, "round", "list")
    assert f":{port}/0" in one_error_line(override, 1)
    reached = run_codemojex(url, "--tag", tag, "round", "list", "--redis-url", redis_server.url)
    assert reached.returncode == 0, reached.stderr


def test_readable_forms_and_the_default_round(cmx):
    """Without --json the commands print aligned text; `round show` defaults to the newest open round;
    the open round's secret is shown nowhere."""
    out = cmx("round", "open", "--keyboard", "🍎 🍌 🍇 🍓 🍒 🍑 🥝 🍋")  # spaces between keys are fine
    assert out.returncode == 0, out.stderr
    fields = dict(
        line.split(None, 1) for line in out.stdout.splitlines() if line and not line.startswith("max")
    )
    assert fields["status"] == "open"
    assert fields["keyboard"] == " ".join(KEYS)
    assert "secret" not in out.stdout
    round_id = fields["round"]
    newer = open_round(cmx)["id"]
    ok(cmx("--json", "round", "close", newer))  # the newest is closed: the default is the one still open
    shown = cmx("round", "show")
    assert shown.returncode == 0, shown.stderr
    assert round_id in shown.stdout
    assert "(revealed after the close)" in shown.stdout
    listed = cmx("round", "list")
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["round", "status", "opens", "closes", "keyboard"]
    assert [row.split()[:2] for row in rows] == [[newer, "closed"], [round_id, "open"]]
    player = cmx("player", "new", "Grace Hopper")
    assert player.returncode == 0
    assert "Grace Hopper" in player.stdout
    assert "wallet     empty" in player.stdout
    assert "3 ticket, 50 coin (each round's first guess tops the wallet up to it)" in player.stdout


def test_help_exits_0():
    """`python -m codemojex.cli --help` lists the commands."""
    out = subprocess.run(
        [sys.executable, "-m", "codemojex.cli", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert out.returncode == 0
    for command in ("round", "player", "guess", "guesses", "lock", "unlock", "board", "wallet", "worker"):
        assert command in out.stdout


def test_round_schedule_shows_and_changes_the_settings(cmx):
    """Off by default (serve writes them); the options given change only those; bad values exit 2."""
    assert ok(cmx("--json", "round", "schedule"))["on"] is False
    changed = ok(cmx("--json", "round", "schedule", "--on", "--duration", "60", "--gap", "5"))
    assert changed == {"on": True, "duration_s": 60.0, "gap_s": 5.0, "retention_s": 7 * 24 * 3600.0}
    kept = ok(cmx("--json", "round", "schedule", "--retention", "3600"))
    assert kept == {**changed, "retention_s": 3600.0}
    assert ok(cmx("--json", "round", "schedule", "--off"))["on"] is False
    assert "schedule" in cmx("round", "schedule").stdout
    for bad in (["--duration", "-1"], ["--duration", "x"], ["--on", "--off"]):
        assert cmx("round", "schedule", *bad).returncode == 2
    refused_zero = cmx("round", "schedule", "--duration", "0")
    assert refused_zero.returncode != 0
    assert "Traceback" not in refused_zero.stderr
    assert ok(cmx("--json", "round", "schedule"))["duration_s"] == 60.0


def test_a_guess_with_wait_replicas_and_no_replica_is_unavailable_and_its_retry_charges_once(cmx):
    """``--wait-replicas 1`` on a server without a replica: the guess ran on the master but no replica
    acknowledged it, so exit 1 ``unavailable``; its retry with the same ``--job`` (without the option)
    is a duplicate with the one charge."""
    round_id, player_id = open_round(cmx)["id"], new_player(cmx)["id"]
    job = ids.mint("JOB")
    durable = cmx("--wait-replicas", "1", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑", "--job", job)
    assert one_error_line(durable, 1).startswith("codemojex: error: unavailable:")
    again = ok(cmx("--json", "guess", round_id, player_id, "🍎🍌🍇🍓🍒🍑", "--job", job))
    assert (again["outcome"], again["job"]) == ("duplicate", job)
    assert ok(cmx("--json", "wallet", player_id))["balances"]["ticket"] == 2
