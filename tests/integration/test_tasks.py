"""echomq.tasks: one worker serves many kinds of job by name; results come back as values."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from echomq import Admission, Bus, InvalidOption, InvalidPayload, JobDead, SyncBus, Worker, ids
from echomq.tasks import Tasks
from tests.support.workers import eventually, running, state_is


def make_tasks():
    tasks = Tasks(lane="work")

    @tasks.task("add")
    async def add(a, b):
        return a + b

    @tasks.task("shout")
    def shout(text, *, times=1):  # a plain function runs in a thread
        in_thread = threading.current_thread() is not threading.main_thread()
        return {"text": text.upper() * times, "thread": in_thread}

    @tasks.task("who", bind=True)
    async def who(job):
        return {"id": job.id, "attempt": job.attempt, "lane": job.lane}

    return tasks


async def test_one_worker_serves_many_kinds_and_results_come_back_as_values(bus):
    tasks = make_tasks()
    add, shout, who = tasks["add"], tasks["shout"], tasks["who"]
    async with running(Worker(bus, tasks.handler, concurrency=4)):
        a = await add.enqueue(bus, 2, 3)
        s = await shout.enqueue(bus, "hi", times=2)
        w = await who.enqueue(bus)
        assert await add.result(bus, a, timeout=30) == 5
        assert await shout.result(bus, s, timeout=30) == {"text": "HIHI", "thread": True}
        assert await who.result(bus, w, timeout=30) == {"id": w, "attempt": 1, "lane": "work"}
    assert await add(1, 1) == 2  # still the function when called directly


async def test_an_unknown_kind_is_dead_lettered_with_a_reason_naming_it(bus, probe):
    """A worker that does not know a task dead-letters its job at once (no retry), naming the kind; a
    worker that knows it runs it once retried from the dead set."""
    sender = Tasks(lane="work")
    sender.register("resize", lambda size: size * 2)
    job = await sender["resize"].enqueue(bus, 21)
    async with running(Worker(bus, make_tasks().handler, concurrency=1)):
        with pytest.raises(JobDead) as dead:
            await bus.result(job, timeout=30)
    assert "unknown task 'resize'" in dead.value.error
    assert probe.row(job)["tries"] == b"1"
    assert await bus.retry_dead(job)
    async with running(Worker(bus, sender.handler, concurrency=1)):
        assert await sender["resize"].result(bus, job, timeout=30) == 42


@pytest.mark.parametrize("payload", [b"\xff\xfe", b"[1, 2]", b'{"args": []}', b'{"task": "add", "args": 5}'])
async def test_a_payload_that_is_not_a_task_message_is_dead_lettered(bus, payload):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="work", payload=payload)
    async with running(Worker(bus, make_tasks().handler, concurrency=1)):
        with pytest.raises(JobDead) as dead:
            await bus.result(job, timeout=30)
    assert "not a task message" in dead.value.error


async def test_a_send_with_the_callers_id_is_idempotent(bus, probe):
    """The same id sent twice is one job: DUPLICATE the second time, nothing more admitted."""
    add = make_tasks()["add"]
    job = ids.mint("JOB")
    first = await add.enqueue_with(bus, (1, 2), job=job, lane="other", priority=3)
    again = await add.enqueue_with(bus, (1, 2), job=job, lane="other", priority=3)
    assert (first.admission, again.admission) == (Admission.ADMITTED, Admission.DUPLICATE)
    assert probe.lane("other") == [job]
    assert json.loads(probe.row(job)["payload"]) == {"task": "add", "args": [1, 2], "kwargs": {}}


async def test_arguments_json_cannot_hold_are_refused_before_anything_is_sent(bus, probe):
    add = make_tasks()["add"]
    for bad in (object(), float("nan"), b"bytes"):
        with pytest.raises(InvalidPayload):
            await add.enqueue(bus, bad, 1)
    assert probe.check() == {}


def test_registration_is_checked():
    tasks = Tasks({"a": len})
    with pytest.raises(InvalidOption):
        tasks.register("a", len)
    for name in ("", "x" * 201, "tab\there", None):
        with pytest.raises(InvalidOption):
            tasks.register(name, len)
    with pytest.raises(InvalidOption):
        tasks.register("b", "not callable")
    assert tasks.names == ["a"]


async def test_a_result_json_cannot_hold_dead_letters_the_job(bus):
    tasks = Tasks(lane="work")
    tasks.register("bad", lambda: {1, 2})
    job = await tasks["bad"].enqueue(bus)
    async with running(Worker(bus, tasks.handler, concurrency=1)):
        with pytest.raises(JobDead) as dead:
            await bus.result(job, timeout=30)
    assert "returned what JSON cannot hold" in dead.value.error


def test_the_sync_bus_sends_tasks(redis_server, tag):
    tasks = make_tasks()
    with SyncBus.from_url(redis_server.url, tag=tag) as sync:
        job = tasks["add"].enqueue_sync(sync, 40, 2)
        assert sync.inspect(job).lane == "work"

        async def work():
            async with Bus.from_url(redis_server.url, tag=tag) as bus, running(Worker(bus, tasks.handler)):
                return await tasks["add"].result(bus, job, timeout=30)

        assert asyncio.run(work()) == 42


async def test_a_trace_runs_from_the_send_to_the_handler(bus):
    """With a tracer provider, the process span is a child of the send span, across the queue."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tasks = make_tasks()
    async with running(Worker(bus, tasks.handler, concurrency=1)):
        job = await tasks["add"].enqueue(bus, 1, 1)
        assert await tasks["add"].result(bus, job, timeout=30) == 2
    spans = {span.name: span for span in exporter.get_finished_spans()}
    send, process = spans["send add"], spans["process add"]
    assert process.context.trace_id == send.context.trace_id
    assert process.parent.span_id == send.context.span_id
    assert process.attributes["messaging.message.id"] == job
    assert process.kind == trace.SpanKind.CONSUMER


# A worker process whose plain-function task never returns: stopped, the process must still exit.
HUNG_TASK_WORKER = """
import asyncio, sys, threading
from echomq import Bus, Worker
from echomq.tasks import Tasks
tasks = Tasks(lane="work")
never = threading.Event()
@tasks.task("stuck")
def stuck():
    print("started", flush=True)
    never.wait()
async def main():
    async with Bus.from_url(sys.argv[1], tag=sys.argv[2]) as bus:
        job = await tasks["stuck"].enqueue(bus)
        worker = Worker(bus, tasks.handler, concurrency=2, lease_ms=5000, grace_s=0.2)
        run = asyncio.create_task(worker.run())
        while (await bus.inspect(job)).state.value != "active":
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        worker.stop()
        await run
    print("stopped", flush=True)
asyncio.run(main())
"""


def test_a_hung_plain_task_never_keeps_the_worker_process_alive(redis_server, tag):
    """A plain function runs in a daemon thread, as a plain handler does: a task that never returns does
    not keep its process alive once the worker stops (in the loop's default executor it did, forever:
    the interpreter joins those threads at exit)."""
    done = subprocess.run(
        [sys.executable, "-c", HUNG_TASK_WORKER, redis_server.url, tag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["started", "stopped"]


async def test_hung_plain_tasks_never_hold_back_the_others(bus):
    """More plain tasks hang than the loop's default executor has threads (at most 32): a quick one sent
    after them still runs at once, in a thread of its own, while they hang."""
    tasks = Tasks(lane="work")
    release = threading.Event()
    tasks.register("hang", lambda: release.wait(60))
    tasks.register("quick", lambda x: x + 1)
    hung = [await tasks["hang"].enqueue(bus) for _ in range(33)]
    try:
        async with running(Worker(bus, tasks.handler, concurrency=40, lease_ms=10_000)):
            for job in hung:
                await eventually(lambda job=job: state_is(bus, job, "active"), 30, "every hung task claimed")
            quick = await tasks["quick"].enqueue(bus, 41)
            assert await tasks["quick"].result(bus, quick, timeout=30) == 42
            release.set()
            for job in hung:
                assert await tasks["hang"].result(bus, job, timeout=30) is True
    finally:
        release.set()


def test_a_task_keeps_its_own_name_and_settings_whatever_the_function_carries():
    """Registering copies the function's name and doc, not its attributes: a Task registered again under
    another name, or a function with a ``name`` or ``lane`` attribute, keeps the registry's name, lane,
    attempts and binding (before, update_wrapper merged the function's __dict__ over the Task's fields,
    so such a task sent messages under another task's name, dead-lettered as unknown)."""
    tasks = Tasks(lane="work")
    first = tasks.register("first", lambda: 1, lane="elsewhere", max_attempts=2, bind=False)
    again = tasks.register("again", first)
    assert (again.name, again.lane, again.max_attempts) == ("again", "work", 5)

    def plain():
        return 2

    plain.name = "not-this"  # type: ignore[attr-defined]
    plain.lane = "nor-this"  # type: ignore[attr-defined]
    plain.bind = True  # type: ignore[attr-defined]
    task = tasks.register("plain", plain)
    assert (task.name, task.lane, task.bind) == ("plain", "work", False)
    assert task.__name__ == "plain"
    assert tasks["again"]() == 1


async def test_bad_arguments_and_settings_are_refused_with_typed_errors(bus, probe):
    add = make_tasks()["add"]
    for args, kwargs in ((5, None), ("ab", None), ((1,), [1, 2]), ((1,), "k")):
        with pytest.raises(InvalidPayload):
            await add.enqueue_with(bus, args, kwargs)
    for bad in ("3", 0, True, 1001):
        with pytest.raises(InvalidOption):
            Tasks(max_attempts=bad)
        with pytest.raises(InvalidOption):
            Tasks().register("t", len, max_attempts=bad)
    with pytest.raises(InvalidOption):
        Tasks().register("t", len, priority=10**7)
    assert probe.check() == {}
