"""echomq.events: lifecycle and progress events on a capped stream, written by the scripts themselves."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from echomq import Finish, InvalidOption, NewJob, ids
from tests.support.workers import ROOT


async def kinds(bus, since="0"):
    return [(e.kind, e.job) async for e in bus.events(since=since)]


async def test_off_by_default_nothing_is_written(bus, probe):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    await bus.complete(claim, b"")
    assert probe.client.exists(f"{bus.keys.prefix}events") == 0
    assert await kinds(bus) == []


async def test_every_change_of_state_is_one_event_in_order(bus, probe):
    """Admitted, claimed, retrying, reclaimed, dead, resurrected, completed, cancelled, revoked, released:
    each script writes its event in the same step as its change, and a refused call writes none."""
    await bus.set_events(1000)
    a, b, c, d = (ids.mint("JOB") for _ in range(4))
    await bus.enqueue_many([NewJob(a, "L", b""), NewJob(b, "M", b"", max_attempts=1), NewJob(c, "N", b"")])
    await bus.enqueue(a, lane="L", payload=b"")  # a duplicate: no event
    claims = {cl.job: cl for cl in await bus.claim(count=3)}
    await bus.fail(claims[a], "flaky", delay_ms=0)
    probe.expire(b)
    await bus.sweep()  # b was on its last try: dead
    await bus.retry_dead(b)
    assert await bus.complete(claims[a], b"") is Finish.STALE  # stale now: no event
    await bus.revoke(c, "stop")
    await bus.enqueue(d, lane="L", payload=b"")
    await bus.cancel(d, "no")
    [again] = [cl for cl in await bus.claim(count=3) if cl.job == a]
    await bus.release(again)
    events = [(kind, job) for kind, job in await kinds(bus)]
    assert events == [
        ("admitted", a), ("admitted", b), ("admitted", c),
        ("claimed", a), ("claimed", b), ("claimed", c),
        ("retrying", a), ("dead", b), ("resurrected", b), ("revoked", c),
        ("admitted", d), ("cancelled", d),
        *[("claimed", job) for job in sorted({a, b}, key=[a, b].index)],
        ("released", a),
    ]  # fmt: skip
    full = [e async for e in bus.events()]
    assert {e.kind: e.text for e in full if e.text} == {"retrying": "flaky", "dead": "lease expired",
                                                       "revoked": "stop", "cancelled": "no"}  # fmt: skip


async def test_progress_is_published_only_by_the_claim_that_holds_the_job(bus, probe):
    await bus.set_events(100)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    assert await bus.progress(claim, "40%") is True
    probe.expire(job)
    await bus.sweep()
    assert await bus.progress(claim, "80%") is False  # the lease was reaped: a stale worker is silent
    texts = [e.text async for e in bus.events() if e.kind == "progress"]
    assert texts == ["40%"]
    with pytest.raises(InvalidOption):
        await bus.progress(claim, "x" * 201)


async def test_the_stream_is_capped(bus, probe):
    await bus.set_events(10)
    await bus.enqueue_many([NewJob(ids.mint("JOB"), "L", b"") for _ in range(500)])
    assert probe.client.xlen(f"{bus.keys.prefix}events") < 200  # MAXLEN ~: about the cap, never all
    with pytest.raises(InvalidOption):
        await bus.set_events(0)


async def test_follow_waits_for_new_events(bus):
    await bus.set_events(100)
    seen: list[str] = []

    async def follow():
        async for event in bus.events(since="$", follow=True):
            seen.append(event.kind)
            if len(seen) == 2:
                return

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.3)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    [claim] = await bus.claim()
    await asyncio.wait_for(task, 20)
    assert seen == ["admitted", "claimed"]
    assert claim.job == job


async def test_the_cli_prints_events_as_json_lines(bus, redis_server, tag):
    env = {**os.environ, "REDIS_URL": redis_server.url, "PYTHONPATH": str(ROOT / "src")}
    on = subprocess.run(
        [sys.executable, "-m", "echomq.cli", "--tag", tag, "events", "--on", "50"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "events on" in on.stdout
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    out = subprocess.run(
        [sys.executable, "-m", "echomq.cli", "--tag", tag, "events"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    [line] = out.stdout.splitlines()
    assert json.loads(line) | {"id": ""} == {"id": "", "event": "admitted", "job": job, "lane": "L"}


async def test_a_deleted_dead_letter_is_an_event(bus):
    await bus.set_events(100)
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "boom", retryable=False)
    await bus.delete_dead(job)
    await bus.delete_dead(job)  # answered ALREADY: nothing changed, no event
    assert [kind for kind, _ in await kinds(bus)] == ["admitted", "claimed", "dead", "deleted"]
