"""``echomq dead delete`` as a subprocess against a real server: one job, every job, and the refusals."""

from __future__ import annotations

import pytest

from echomq import ids
from tests.support.workers import run_cli


@pytest.fixture
def echomq(redis_server, tag):
    """Run ``echomq --tag <tag> ARGS`` against the session server."""

    def run(*args):
        return run_cli(redis_server.url, "--tag", tag, *args)

    return run


async def _dead_job(bus):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"hello", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "crashed")
    return job


async def test_dead_delete_one_then_again(bus, echomq):
    """dead delete JOB deletes it (exit 0); a second run says it was deleted already (exit 0)."""
    job = await _dead_job(bus)
    out = echomq("dead", "delete", job)
    assert (out.returncode, out.stdout.strip()) == (0, f"{job} deleted"), out.stderr
    assert await bus.dead_jobs() == []
    assert (await bus.stats()).counters["deleted"] == 1
    again = echomq("dead", "delete", job)
    assert (again.returncode, again.stdout.strip()) == (0, f"{job} was deleted already"), again.stderr
    assert (await bus.stats()).counters["deleted"] == 1


async def test_dead_delete_all(bus, echomq):
    """dead delete --all deletes every dead job and says how many."""
    for _ in range(3):
        await _dead_job(bus)
    out = echomq("dead", "delete", "--all")
    assert (out.returncode, out.stdout.strip()) == (0, "3 dead jobs deleted"), out.stderr
    assert (await bus.stats()).dead == 0


async def test_dead_delete_refuses_a_live_job_an_unknown_one_and_a_bad_id(bus, echomq):
    """A queued job: exit 1, not dead, still queued; an unknown id: exit 1; an ill-formed id or no
    argument: exit 2 before Redis is reached."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    out = echomq("dead", "delete", job)
    assert out.returncode == 1
    assert "is not dead (state queued)" in out.stderr
    assert (await bus.inspect(job)).state.value == "queued"
    unknown = echomq("dead", "delete", ids.mint("JOB"))
    assert unknown.returncode == 1
    assert "no job" in unknown.stderr
    for args in (("dead", "delete", "JOB123"), ("dead", "delete"), ("dead", "delete", job, "--all")):
        bad = echomq(*args)
        assert bad.returncode == 2, args
        assert "Traceback" not in bad.stderr


def test_echomq_dashboard_serves_the_page_and_stops_on_sigterm(redis_server, tag):
    """``echomq dashboard --port N --read-only`` prints its URL, serves the page (no buttons), and stops
    on SIGTERM; a bad port exits 2 before serving."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    import httpx  # noqa: PLC0415

    from echomq.testing.server import free_port  # noqa: PLC0415
    from tests.support.workers import ROOT  # noqa: PLC0415

    port = free_port()
    env = dict(os.environ, REDIS_URL=redis_server.url)
    command = [sys.executable, "-m", "echomq.cli", "--tag", tag, "dashboard", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--read-only"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == f"dashboard of bus {tag} on http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.ConnectError:
                import time  # noqa: PLC0415

                time.sleep(0.1)
        assert page.status_code == 200
        assert 'data-testid="read-only"' in page.text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert proc.returncode in (0, -15), err  # uvicorn re-raises SIGTERM once it has shut down gracefully
    assert "Traceback" not in err
    bad = subprocess.run(
        [*command[:-1], "70000"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2, bad.stderr
    assert "Traceback" not in bad.stderr
