"""echomq.SyncBus, the producer's bus on a blocking client: the same admission, answers, typed errors and
keyspace as the asyncio Bus, a lost reply's retry answered truthfully, and one bus shared by threads."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from echomq import (
    Admission,
    Bus,
    InvalidId,
    InvalidLane,
    InvalidOption,
    InvalidPayload,
    NewJob,
    PayloadTooLarge,
    RedisUnavailable,
    Settings,
    SyncBus,
    UnknownJob,
    ids,
)
from echomq.scripts import KEY_COUNTS, source
from echomq.testing.server import RedisProcess
from tests.support.pausing import (
    pause,
    signal_server,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)
from tests.support.probe import Probe


@pytest.fixture
def sync_bus(redis_server, tag) -> Iterator[SyncBus]:
    """A SyncBus on the session server under this test's own tag."""
    with SyncBus.from_url(redis_server.url, tag=tag) as bus:
        yield bus


@pytest.fixture
def probe(sync_redis, sync_bus) -> Probe:
    view = Probe(sync_redis, sync_bus.keys)
    assert view.check() == {}
    return view


def test_admits_a_new_job_as_queued_on_its_lane(sync_bus, probe):
    """A new id is ADMITTED: its row is queued on its lane at its priority, the lane joins the ring."""
    job = ids.mint("JOB")
    admission = sync_bus.enqueue(job, lane="PLR1", payload=b"guess", max_attempts=3, priority=2)
    assert admission is Admission.ADMITTED
    assert probe.check() == {job: "queued"}
    row = probe.row(job)
    assert (row["lane"], row["payload"], row["max"], row["priority"]) == (b"PLR1", b"guess", b"3", b"2")
    assert probe.client.zscore(sync_bus.keys.lane("PLR1"), job) == 2
    assert probe.ring() == ["PLR1"]
    assert probe.counters()["admitted"] == 1


def test_a_delayed_job_waits_in_the_delayed_set(sync_bus, probe):
    """delay_ms puts the job in the delayed set, not on its lane."""
    job = ids.mint("JOB")
    assert sync_bus.enqueue(job, lane="L", payload=b"", delay_ms=60_000) is Admission.ADMITTED
    assert probe.check() == {job: "delayed"}
    assert sync_bus.inspect(job).state.value == "delayed"


def test_duplicate_and_conflict_change_nothing(sync_bus, probe):
    """The same id again is DUPLICATE (same lane and payload) or CONFLICT (other lane or payload); neither
    changes anything but its counter."""
    job = ids.mint("JOB")
    sync_bus.enqueue(job, lane="PLR1", payload=b"guess")
    before = probe.snapshot()
    assert sync_bus.enqueue(job, lane="PLR1", payload=b"guess", priority=7) is Admission.DUPLICATE
    assert sync_bus.enqueue(job, lane="PLR1", payload=b"other") is Admission.CONFLICT
    assert sync_bus.enqueue(job, lane="PLR2", payload=b"guess") is Admission.CONFLICT
    probe.check()
    probe.assert_unchanged(before, duplicate=1, conflict=2)
    assert probe.row(job)["payload"] == b"guess"


def test_enqueue_many_answers_each_job_in_order(sync_bus, probe):
    """A batch answers each job in order: new ones ADMITTED, a known id DUPLICATE or CONFLICT."""
    known = ids.mint("JOB")
    sync_bus.enqueue(known, lane="A", payload=b"k")
    fresh = [ids.mint("JOB") for _ in range(3)]
    batch = [
        NewJob(fresh[0], "A", b"1"),
        NewJob(known, "A", b"k"),
        NewJob(fresh[1], "B", b"2"),
        NewJob(known, "A", b"changed"),
        NewJob(fresh[2], "C", b"3", delay_ms=60_000),
    ]
    assert sync_bus.enqueue_many(batch) == [
        Admission.ADMITTED,
        Admission.DUPLICATE,
        Admission.ADMITTED,
        Admission.CONFLICT,
        Admission.ADMITTED,
    ]
    assert probe.check() == {known: "queued", fresh[0]: "queued", fresh[1]: "queued", fresh[2]: "delayed"}


def test_enqueue_many_of_one_and_of_none(sync_bus, probe):
    """A batch of one job answers a list of one; an empty batch sends nothing."""
    job = ids.mint("JOB")
    assert sync_bus.enqueue_many([NewJob(job, "L", b"")]) == [Admission.ADMITTED]
    assert sync_bus.enqueue_many([]) == []
    assert probe.check() == {job: "queued"}


GOOD = {"lane": "L", "payload": b"p"}
BAD_INPUT = [
    ("an ill-formed id", {"job": "JOB123"}, InvalidId),
    ("another brand", {"job": ids.mint("PLR")}, InvalidId),
    ("a lower-case id", {"job": ids.mint("JOB").lower()}, InvalidId),
    ("an int id", {"job": 12}, InvalidId),
    ("an empty lane", {"lane": ""}, InvalidLane),
    ("a lane with a space", {"lane": "a b"}, InvalidLane),
    ("a str payload", {"payload": "text"}, InvalidPayload),
    ("a payload over the limit", {"payload": b"x" * 1025}, PayloadTooLarge),
    ("zero max attempts", {"max_attempts": 0}, InvalidOption),
    ("a bool priority", {"priority": True}, InvalidOption),
    ("a negative delay", {"delay_ms": -1}, InvalidOption),
]


@pytest.mark.parametrize(("case", "change", "error"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_raises_its_typed_error_and_changes_nothing(
    redis_server, tag, sync_redis, case, change, error
):
    """Each ill-formed argument raises its InvalidInput error, one by one and in a batch whose other jobs
    are good; nothing of either call reaches the server."""
    with SyncBus.from_url(redis_server.url, tag=tag, settings=Settings(max_payload=1024)) as bus:
        spec: dict[str, Any] = {"job": ids.mint("JOB"), **GOOD, **change}
        with pytest.raises(error):
            bus.enqueue(spec.pop("job"), **spec)
        good = NewJob(ids.mint("JOB"), "L", b"p")
        spec = {"job": ids.mint("JOB"), **GOOD, **change}
        with pytest.raises(error):
            bus.enqueue_many([good, NewJob(**spec)])
        assert sync_redis.keys(bus.keys.pattern) == []


def test_a_sync_producer_and_an_asyncio_worker_share_one_keyspace(redis_server, tag, sync_bus):
    """A job a SyncBus admits is claimed and completed by an asyncio Bus of the same tag, and the SyncBus
    then inspects it as done and counts it in its stats."""
    job = ids.mint("JOB")
    assert sync_bus.enqueue(job, lane="PLR1", payload=b"guess") is Admission.ADMITTED

    async def work() -> None:
        async with Bus.from_url(redis_server.url, tag=tag) as bus:
            [claim] = await bus.claim()
            assert (claim.job, claim.payload) == (job, b"guess")
            await bus.complete(claim, b"scored")

    asyncio.run(work())
    info = sync_bus.inspect(job)
    assert (info.state.value, info.result, info.tries) == ("done", b"scored", 1)
    stats = sync_bus.stats()
    assert (stats.counters["admitted"], stats.counters["completed"], stats.done) == (1, 1, 1)
    with pytest.raises(UnknownJob):
        sync_bus.inspect(ids.mint("JOB"))


def test_a_flushed_script_cache_is_loaded_again(sync_bus, sync_redis, probe):
    """After SCRIPT FLUSH (a restarted server) one enqueue and a batch are still admitted, once each."""
    sync_redis.script_flush()
    one = ids.mint("JOB")
    assert sync_bus.enqueue(one, lane="L", payload=b"") is Admission.ADMITTED
    sync_redis.script_flush()
    batch = [NewJob(ids.mint("JOB"), "L", b"") for _ in range(3)]
    assert sync_bus.enqueue_many(batch) == [Admission.ADMITTED] * 3
    assert len(probe.check()) == 4
    assert probe.counters()["admitted"] == 4


def test_threads_share_one_bus_and_each_id_is_admitted_once(sync_bus, probe):
    """Eight threads enqueue the same 200 ids through one SyncBus: each id is admitted once, every other
    call answers DUPLICATE, and no call fails."""
    jobs = [NewJob(ids.mint("JOB"), f"lane{i % 7}", b"p%d" % i) for i in range(200)]
    answers: list[Admission] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def produce(offset: int) -> None:
        try:
            for i in range(len(jobs)):
                spec = jobs[(i + offset * 25) % len(jobs)]
                got = sync_bus.enqueue(spec.job, lane=spec.lane, payload=spec.payload)
                with lock:
                    answers.append(got)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert answers.count(Admission.ADMITTED) == 200
    assert answers.count(Admission.DUPLICATE) == 7 * 200
    assert len(probe.check()) == 200
    assert probe.counters()["admitted"] == 200


def test_a_sync_bus_needs_a_blocking_client():
    """An asyncio client is refused with InvalidOption, before anything is sent."""
    with pytest.raises(InvalidOption):
        SyncBus(redis.asyncio.Redis())  # type: ignore[arg-type]


# --- lost replies: the server paused (SIGSTOP) past the client's socket timeout, then continued --------

SOCKET_TIMEOUT_S = 0.5
PAUSE_S = 2.0


def _paused_bus(server: RedisProcess, retries: int) -> SyncBus:
    client = redis.Redis(
        host="127.0.0.1", port=server.port, socket_timeout=SOCKET_TIMEOUT_S, retry=Retry(NoBackoff(), retries)
    )
    for name in KEY_COUNTS:  # loaded: a first EVALSHA in flight would only run into NOSCRIPT
        client.script_load(source(name))
    return SyncBus(client, tag="lost")


def test_an_enqueue_whose_reply_is_lost_is_a_duplicate_when_sent_again(server):
    """An enqueue in flight across a pause raises RedisUnavailable (no client retry); the job was admitted
    when Redis resumed, and sending it again answers DUPLICATE: one job, never two."""
    with _paused_bus(server, retries=0) as bus:
        job = ids.mint("JOB")
        pause(server, seconds=None)
        try:
            with pytest.raises(RedisUnavailable):
                bus.enqueue(job, lane="L", payload=b"p")
        finally:
            signal_server(server, signal.SIGCONT)
        assert bus.enqueue(job, lane="L", payload=b"p") is Admission.DUPLICATE
        assert bus.stats().counters["admitted"] == 1
        assert bus.inspect(job).state.value == "queued"


def test_an_enqueue_retried_by_the_client_after_a_lost_reply_answers_duplicate(server):
    """With redis-py retrying (the client's Retry), the call whose first reply was lost answers DUPLICATE
    (its own first run admitted it) and the job exists once; a batch does the same."""
    with _paused_bus(server, retries=10) as bus:
        job = ids.mint("JOB")
        pause(server, PAUSE_S)
        assert bus.enqueue(job, lane="L", payload=b"p") is Admission.DUPLICATE
        batch = [NewJob(ids.mint("JOB"), "L", b"b") for _ in range(3)]
        pause(server, PAUSE_S)
        assert bus.enqueue_many(batch) == [Admission.DUPLICATE] * 3
        stats = bus.stats()
        assert (stats.counters["admitted"], stats.queued) == (4, 4)
