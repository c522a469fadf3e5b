"""echomq.Worker's on_dead hook on a real Redis: awaited once for each job this worker's fail
dead-lettered (a Permanent error, or the last try failing), never for a retry; its errors are logged."""

from __future__ import annotations

import logging

from echomq import Permanent, Worker, ids
from tests.support.workers import eventually, running, state_is


async def test_on_dead_is_awaited_for_each_job_the_worker_dead_letters(bus):
    """A Permanent failure and a last try each call the hook once; a retried try does not."""
    seen: list[str] = []
    tries: dict[str, int] = {}

    async def handler(job):
        tries[job.id] = tries.get(job.id, 0) + 1
        if job.payload == b"permanent":
            raise Permanent("never")
        raise RuntimeError("again")

    async def on_dead(job):
        seen.append(job.id)

    permanent, flaky = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(permanent, lane="A", payload=b"permanent", max_attempts=5)
    await bus.enqueue(flaky, lane="B", payload=b"flaky", max_attempts=2)
    async with running(Worker(bus, handler, on_dead=on_dead)):
        for job in (permanent, flaky):
            await eventually(lambda job=job: state_is(bus, job, "dead"), what=f"{job} dead")
        await eventually(lambda: len(seen) == 2, what="both hooks")
    assert sorted(seen) == sorted([permanent, flaky])
    assert tries == {permanent: 1, flaky: 2}  # the flaky job's first try was retried, without the hook


async def test_a_failing_hook_is_logged_and_the_worker_goes_on(bus, caplog):
    """The hook raising leaves the job dead, logs job.dead_hook_failed, and the worker keeps working."""

    async def handler(job):
        if job.payload == b"bad":
            raise Permanent("never")
        return b"ok"

    async def on_dead(job):
        raise RuntimeError("hook broke")

    bad, good = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(bad, lane="A", payload=b"bad")
    caplog.set_level(logging.ERROR, logger="echomq.worker")
    async with running(Worker(bus, handler, on_dead=on_dead)):
        await eventually(lambda: state_is(bus, bad, "dead"), what="the bad job dead")
        await bus.enqueue(good, lane="B", payload=b"good")
        await eventually(lambda: state_is(bus, good, "done"), what="the next job done")
    failed = [r for r in caplog.records if getattr(r, "event", None) == "job.dead_hook_failed"]
    assert [r.fields["job"] for r in failed] == [bad]  # type: ignore[attr-defined]
