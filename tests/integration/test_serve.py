"""``codemojex serve`` as a newcomer runs it (``make run``): no configuration, an embedded Redis in a data
folder, a worker, the web host. Played over HTTP, stopped with SIGINT, started again: every admitted guess
is still there, and a guess that was queued at the stop is scored after the restart."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from codemojex import access
from codemojex.keys import GameKeys
from echomq.testing.server import RedisProcess, free_port
from tests.support.web import wait_until

ROOT = Path(__file__).resolve().parents[2]
# What the real guess writes to the real ledger (its charge, the round's allowance, a solve's reward):
# the proof's jobs write nothing there.
REAL_PLAY = ("guess", "allowance", "reward")


class Serve:
    """One ``codemojex serve`` process; its output is collected line by line."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        *,
        redis_url: str | None = None,
        tag: str = "cm",
        extra: tuple[str, ...] = (),
    ) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("REDIS_URL", None)
        env.pop("CODEMOJEX_OPERATOR_TOKEN", None)
        if redis_url is not None:
            env["REDIS_URL"] = redis_url
        argv = ["serve", "--port", str(port), "--data-dir", str(data_dir), "--tag", tag, *extra]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "codemojex.cli", *argv],
            cwd=data_dir.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_up(self, timeout: float = 60) -> str:
        """The dashboard line's operator token, once the host says it is up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"dashboard: \S+#operator=(\S+)", self.output)
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"serve did not come up:\n{self.output}")

    def stop(self, timeout: float = 60) -> int:
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout)
        self._close()
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._close()

    def _close(self) -> None:
        self.reader.join(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.mark.slow
def test_serve_plays_stops_on_sigint_and_restarts_with_every_guess(tmp_path):
    data_dir = tmp_path / ".codemojex-data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = Serve(data_dir, port)
    try:
        first.wait_up()
        assert "embedded redis-server" in first.output
        assert re.search(r"opened round RND\w+", first.output)
        with httpx.Client(base_url=base, timeout=10) as anon:
            joined = anon.post("/api/players", json={"name": "Newcomer"}).json()
            round_id = anon.get("/api/rounds/current").json()["round_id"]
            keyboard = anon.get("/api/rounds/current").json()["keyboard"]
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {joined['token']}"}
        ) as me:
            guesses = f"/api/rounds/{round_id}/guesses"
            scored_job = me.post(guesses, json={"guess": keyboard[:6]}).json()["job_id"]
            wait_until(
                lambda: me.get(f"/api/jobs/{scored_job}").json()["state"] == "done", what="the first guess"
            )
            os.kill(_worker_pid(first), signal.SIGSTOP)  # frozen: the next guess stays queued
            queued_job = me.post(guesses, json={"guess": keyboard[1:7]}).json()["job_id"]
            # Not run: it waits in its lane, or is held by the claim the frozen worker left waiting behind
            # its BLPOP (Redis runs it when the guess's token arrives; its lease then runs out).
            assert me.get(f"/api/jobs/{queued_job}").json()["state"] in ("queued", "active")

        second = Serve(data_dir, free_port())  # the same folder while the first one runs
        try:
            assert second.process.wait(60) == 1
        finally:
            second.kill()
        assert "is locked by another codemojex serve" in second.output

        assert first.stop() == 0
        assert "stopped" in first.lines[-1]
    finally:
        first.kill()

    again = Serve(data_dir, port)
    try:
        again.wait_up()
        assert "opened round" not in again.output  # the round is still open: the data survived the stop
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {joined['token']}"}
        ) as me:
            assert me.get("/api/rounds/current").json()["round_id"] == round_id

            def both_scored():
                listed = me.get(f"/api/rounds/{round_id}/guesses").json()["guesses"]
                return [g["job_id"] for g in listed if g["state"] == "scored"] == [scored_job, queued_job]

            wait_until(both_scored, timeout=30, what="the queued guess being scored after the restart")
            assert me.get("/api/wallet").json()["balances"] == {"coin": 50, "ticket": 1}
        assert again.stop() == 0
    finally:
        again.kill()


def test_serve_refuses_a_folder_a_live_redis_server_still_uses(tmp_path):
    """A redis-server left running on the data folder (its pid file names it) refuses the start."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    squatter = RedisProcess(data_dir, extra=("--pidfile", str((data_dir / "redis.pid").resolve())))
    squatter.start()
    try:
        wait_until((data_dir / "redis.pid").exists, what="the pid file")
        refused = Serve(data_dir, free_port())
        try:
            assert refused.process.wait(60) == 1
        finally:
            refused.kill()
        assert f"a redis-server (pid {squatter.process.pid}) still runs on the data folder" in refused.output
    finally:
        squatter.stop()


def _workers(serve_pid: int) -> dict[str, int]:
    """serve's worker processes by the tag they run on (``cm``: the real one; ``cm.proof``: the demo's)."""
    found = {}
    for task in Path(f"/proc/{serve_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
            if "worker" in argv and "--tag" in argv:
                found[argv[argv.index("--tag") + 1]] = int(child)
    return found


def _worker_pid(serve: Serve, tag: str = "cm") -> int:
    """The real score worker's pid (the proof page shows only the demo worker's, and only to the operator)."""
    return wait_until(lambda: _workers(serve.process.pid).get(tag), what=f"the worker on {tag}")


def _demo_worker(base: str, operator: str) -> dict[str, Any]:
    """The demo worker, as /api/proof shows it to the operator (players see an opaque instance)."""
    with httpx.Client(base_url=base, timeout=10, headers={"Authorization": f"Bearer {operator}"}) as op:
        worker: dict[str, Any] = op.get("/api/proof").json()["worker"]
    return worker


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.slow
def test_a_serve_killed_by_sigkill_leaves_no_orphan_and_its_data_serves_again(tmp_path):
    """The worker and the embedded Redis die with serve (SIGTERM from the kernel), so the folder is free
    and the next start finds the admitted guess."""
    data_dir = tmp_path / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = Serve(data_dir, port)
    try:
        operator = first.wait_up()
        with httpx.Client(base_url=base, timeout=10) as anon:
            joined = anon.post("/api/players", json={"name": "Ada"}).json()
            current = anon.get("/api/rounds/current").json()
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {joined['token']}"}
        ) as me:
            job = me.post(
                f"/api/rounds/{current['round_id']}/guesses", json={"guess": current["keyboard"][:6]}
            )
            job_id = job.json()["job_id"]
        worker_pid = _worker_pid(first)
        demo_pid = _demo_worker(base, operator)["pid"]
        assert _workers(first.process.pid) == {"cm": worker_pid, "cm.proof": demo_pid}
        redis_pid = int((data_dir / "redis.pid").read_text())
        first.kill()  # SIGKILL: serve runs no clean-up of its own
        wait_until(
            lambda: _gone(worker_pid) and _gone(demo_pid) and _gone(redis_pid),
            what="the workers and Redis ending with serve",
        )
    finally:
        first.kill()
    again = Serve(data_dir, port)
    try:
        again.wait_up()
        with httpx.Client(
            base_url=base, timeout=10, headers={"Authorization": f"Bearer {joined['token']}"}
        ) as me:
            state = wait_until(
                lambda: me.get(f"/api/jobs/{job_id}").json()["state"] == "done", what="the guess"
            )
            assert state
        assert again.stop() == 0
    finally:
        again.kill()


def test_with_redis_url_serve_uses_that_server_and_starts_no_embedded_one(
    tmp_path, redis_server, sync_redis, tag
):
    port = free_port()
    serve = Serve(tmp_path / "data", port, redis_url=redis_server.url, tag=tag)
    try:
        serve.wait_up()
        assert "embedded redis-server" not in serve.output
        assert not (tmp_path / "data" / "redis.pid").exists()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as anon:
            round_id = anon.get("/api/rounds/current").json()["round_id"]
        assert sync_redis.zrange(f"cmx:{{{tag}}}:rounds", 0, -1) == [round_id.encode()]
        assert serve.stop() == 0
    finally:
        serve.kill()


@pytest.mark.slow
def test_crashing_the_demo_worker_never_restarts_the_real_one(tmp_path, redis_server, tag):
    """The attack: one crash request a second used to restart the worker that scores real players. With
    ``--proof-crash`` the crash kills the demo worker only: the real worker keeps its pid (it never
    restarted) and real guesses keep being scored meanwhile."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = Serve(tmp_path / "data", port, redis_url=redis_server.url, tag=tag, extra=("--proof-crash",))
    try:
        operator = serve.wait_up()
        assert f"proof:     {base}/proof (demo bus {tag}.proof), crash button on" in serve.output
        real_pid = _worker_pid(serve, tag)
        with httpx.Client(base_url=base, timeout=10) as anon:
            joined = anon.post("/api/players", json={"name": "Ada"}).json()
            current = anon.get("/api/rounds/current").json()
            assert anon.get("/api/proof").json()["crash"] is True
        me = httpx.Client(base_url=base, timeout=10, headers={"Authorization": f"Bearer {joined['token']}"})
        with me:
            wallet = me.get("/api/wallet").json()
            demo_before = _demo_worker(base, operator)
            for crash in range(2):
                job = me.post("/api/proof/jobs", json={"crash": True})
                assert job.status_code == 202, job.text
                wait_until(
                    lambda: _demo_worker(base, operator)["restarts"] == demo_before["restarts"] + crash + 1,  # noqa: B023
                    timeout=30,
                    what="the demo worker restarted after the crash",
                )
                guess = me.post(
                    f"/api/rounds/{current['round_id']}/guesses",
                    json={"guess": current["keyboard"][crash:][:6]},
                )
                real_job = guess.json()["job_id"]
                wait_until(
                    lambda: me.get(f"/api/jobs/{real_job}").json()["state"] == "done",  # noqa: B023
                    timeout=10,
                    what="the real guess scored while the demo worker crashes",
                )
                assert _worker_pid(serve, tag) == real_pid  # the real worker never restarted
            assert _demo_worker(base, operator)["pid"] != demo_before["pid"]
            charged = me.get("/api/wallet").json()
            assert [e for e in charged["ledger"] if e["reason"] not in REAL_PLAY] == wallet["ledger"]
        assert "score worker pid" not in serve.output  # the real worker never ended
        assert serve.output.count("proof worker pid") == 2
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_serve_keeps_the_crash_button_off_by_default(tmp_path, redis_server, tag):
    port = free_port()
    serve = Serve(tmp_path / "data", port, redis_url=redis_server.url, tag=tag)
    try:
        serve.wait_up()
        assert "crash button off" in serve.output
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as anon:
            joined = anon.post("/api/players", json={"name": "Ada"}).json()
            assert anon.get("/api/proof").json()["crash"] is False
            crash = anon.post(
                "/api/proof/jobs",
                json={"crash": True},
                headers={"Authorization": f"Bearer {joined['token']}"},
            )
        assert (crash.status_code, crash.json()["error"]["code"]) == (403, "proof_crash_off")
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_the_embedded_redis_has_least_privilege_users_and_no_password_on_a_command_line(tmp_path):
    """The embedded Redis: the default user off, the game's users with passwords generated into the data
    folder (0600), read by redis-server from a 0600 redis.conf; no password on redis-server's or the
    worker's command line; the host's user gets NOPERM on a secret, and the operator's open and close
    (run by the worker) work through the host."""
    data_dir = tmp_path / ".codemojex-data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = Serve(data_dir, port)
    try:
        operator = serve.wait_up()
        passwords = access.read_passwords(data_dir / "redis-users.json")
        for name in ("redis-users.json", "redis.conf"):
            assert (data_dir / name).stat().st_mode & 0o777 == 0o600, name
        redis_pid = int((data_dir / "redis.pid").read_text())
        for pid in (redis_pid, _worker_pid(serve), _worker_pid(serve, "cm.proof")):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert all(password.encode() not in cmdline for password in passwords.values()), cmdline
        found = re.search(r"embedded redis-server on redis://127.0.0.1:(\d+)/0", serve.output)
        assert found is not None
        redis_port = int(found.group(1))
        anonymous = redis.Redis(port=redis_port)
        host = redis.Redis(
            port=redis_port, username=access.user_name(access.HOST, "cm"), password=passwords["host"]
        )
        try:
            with pytest.raises(redis.AuthenticationError):
                anonymous.ping()
            with httpx.Client(
                base_url=base, timeout=10, headers={"Authorization": f"Bearer {operator}"}
            ) as op:
                opened = op.post("/api/operator/rounds", json={"size": 8})
                assert opened.status_code == 201, opened.text
                round_id = opened.json()["round_id"]
                with pytest.raises(redis.exceptions.NoPermissionError):
                    host.get(GameKeys("cm").secret(round_id))
                closed = op.post(f"/api/operator/rounds/{round_id}/close")
                assert closed.status_code == 200, closed.text
                assert len(op.get(f"/api/rounds/{round_id}").json()["secret"]) == 6
        finally:
            anonymous.close()
            host.close()
        assert serve.stop() == 0
    finally:
        serve.kill()


@pytest.mark.slow
def test_serve_keeps_the_round_schedule_on_its_users(tmp_path):
    """The embedded Redis's users: the worker's upkeep closes the round on its clock, concludes it into
    the history and opens the next; the host serves the lobby and the history."""
    port = free_port()
    serve = Serve(
        tmp_path / ".codemojex-data",
        port,
        extra=("--no-proof", "--round-duration", "2", "--round-gap", "0", "--retention", "3600"),
    )
    try:
        serve.wait_up()
        assert re.search(r"the schedule opened round RND\w+ \(2 s\)", serve.output)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as anon:
            [first] = anon.get("/api/lobby").json()["rounds"]
            assert first["closes_ms"] == first["opens_ms"] + 2000

            def next_round():
                rounds = anon.get("/api/lobby").json()["rounds"]
                return rounds and rounds[0]["round_id"] != first["round_id"]

            wait_until(next_round, timeout=30, what="the next scheduled round")
            wait_until(lambda: anon.get(f"/api/history/{first['round_id']}").status_code == 200)
            summary = anon.get("/api/history").json()["rounds"][-1]
            assert summary["round_id"] == first["round_id"]
            assert len(summary["secret"]) == 6
        assert serve.stop() == 0
    finally:
        serve.kill()


@pytest.mark.slow
def test_serve_spreads_one_game_over_partitions_on_its_users(tmp_path):
    """``codemojex serve --partitions 3`` on the embedded Redis, its least-privilege users naming every
    partition's tag: the schedule's round is in every partition, players of every partition join and
    their guesses are scored, the operator's open runs through the worker (the host's user may not
    write a secret), and the worker concludes a scheduled round into the whole game's history."""
    port = free_port()
    serve = Serve(
        tmp_path / ".codemojex-data",
        port,
        tag="sp",
        extra=("--no-proof", "--partitions", "3", "--round-duration", "3", "--round-gap", "0"),
    )
    try:
        operator_token = serve.wait_up()
        assert "in every partition" in serve.output
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=15) as anon:
            first = anon.get("/api/lobby").json()["rounds"][0]
            tokens = [
                anon.post("/api/players", json={"name": f"Spread {i}"}).json()["token"] for i in range(6)
            ]
        with httpx.Client(
            base_url=base, timeout=15, headers={"Authorization": f"Bearer {operator_token}"}
        ) as op:
            opened = op.post("/api/operator/rounds", json={"size": 8, "duration_s": 60})
            assert opened.status_code == 201, opened.text
            keyboard, round_id = opened.json()["keyboard"], opened.json()["round_id"]
            jobs = []
            for token in tokens:
                with httpx.Client(
                    base_url=base, timeout=15, headers={"Authorization": f"Bearer {token}"}
                ) as me:
                    reply = me.post(f"/api/rounds/{round_id}/guesses", json={"guess": keyboard[:6]})
                    assert reply.status_code == 202, reply.text
                    jobs.append(reply.json()["job_id"])
            wait_until(
                lambda: all(op.get(f"/api/jobs/{job}").json()["scored_count"] == 1 for job in jobs),
                what="every guess scored",
            )
            lanes = {op.get(f"/api/jobs/{job}").json()["lane"] for job in jobs}
            assert len(lanes) == len(tokens)
        with httpx.Client(base_url=base, timeout=15) as anon:
            wait_until(lambda: anon.get(f"/api/history/{first['round_id']}").status_code == 200, timeout=30)
        assert serve.stop() == 0
    finally:
        serve.kill()


def _as(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=15, headers={"Authorization": f"Bearer {token}"})
