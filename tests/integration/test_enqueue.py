"""enqueue.lua through echomq.jobs.enqueue: one idempotent admission per branded JOB id."""

from __future__ import annotations

from echomq import Admission, Bus, NewJob, Settings, ids
from tests.support.probe import Probe


async def test_admits_a_new_job_as_queued_on_its_lane(bus, probe):
    """A new id is admitted: its row is queued, it is in its lane at its priority, the lane is in the ring."""
    job = ids.mint("JOB")
    assert await bus.enqueue(job, lane="PLR1", payload=b"guess", max_attempts=3, priority=2) is (
        Admission.ADMITTED
    )
    assert probe.check() == {job: "queued"}
    row = probe.row(job)
    assert row["lane"] == b"PLR1"
    assert row["payload"] == b"guess"
    assert (row["attempts"], row["tries"], row["max"], row["priority"]) == (b"0", b"0", b"3", b"2")
    assert probe.client.zscore(bus.keys.lane("PLR1"), job) == 2
    assert probe.ring() == ["PLR1"]
    assert probe.counters()["admitted"] == 1
    assert probe.wake_tokens() == 1


async def test_lanes_join_the_ring_once_in_order_of_first_job(bus, probe):
    """A lane joins the ring at its right end when it gets its first job, and only then."""
    await bus.enqueue(ids.mint("JOB"), lane="A", payload=b"")
    assert probe.ring() == ["A"]
    probe.check()
    await bus.enqueue(ids.mint("JOB"), lane="B", payload=b"")
    assert probe.ring() == ["A", "B"]
    probe.check()
    await bus.enqueue(ids.mint("JOB"), lane="A", payload=b"")
    assert probe.ring() == ["A", "B"]
    probe.check()
    await bus.enqueue(ids.mint("JOB"), lane="C", payload=b"")
    assert probe.ring() == ["A", "B", "C"]
    assert len(probe.check()) == 4


async def test_duplicate_with_same_lane_and_payload_changes_nothing(bus, probe):
    """The same id with the same lane and payload is DUPLICATE; only the duplicate counter moves."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess")
    probe.check()
    before = probe.snapshot()
    for _ in range(3):
        assert await bus.enqueue(job, lane="PLR1", payload=b"guess") is Admission.DUPLICATE
        probe.check()
    probe.assert_unchanged(before, duplicate=3)


async def test_duplicate_ignores_options_other_than_lane_and_payload(bus, probe):
    """A re-enqueue with other max_attempts, priority or delay but the same lane and payload is DUPLICATE."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess")
    before = probe.snapshot()
    admission = await bus.enqueue(
        job, lane="PLR1", payload=b"guess", max_attempts=9, priority=-5, delay_ms=60_000
    )
    assert admission is Admission.DUPLICATE
    probe.check()
    probe.assert_unchanged(before, duplicate=1)


async def test_conflict_on_another_payload_changes_nothing(bus, probe):
    """The same id with another payload is CONFLICT, never an overwrite; only the conflict counter moves."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess")
    before = probe.snapshot()
    assert await bus.enqueue(job, lane="PLR1", payload=b"other") is Admission.CONFLICT
    probe.check()
    assert await bus.enqueue(job, lane="PLR1", payload=b"") is Admission.CONFLICT
    probe.check()
    probe.assert_unchanged(before, conflict=2)
    assert probe.row(job)["payload"] == b"guess"


async def test_conflict_on_another_lane_changes_nothing(bus, probe):
    """The same id on another lane is CONFLICT; the job stays on its first lane and no lane is created."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"guess")
    before = probe.snapshot()
    assert await bus.enqueue(job, lane="PLR2", payload=b"guess") is Admission.CONFLICT
    assert probe.check() == {job: "queued"}
    probe.assert_unchanged(before, conflict=1)
    assert probe.ring() == ["PLR1"]


async def test_duplicate_and_conflict_are_answered_in_every_state(bus, probe):
    """Admission stays idempotent while the job is active, done or dead, and nothing changes."""
    done, dead = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(done, lane="L", payload=b"d")
    await bus.enqueue(dead, lane="L", payload=b"x", max_attempts=1)
    first, second = await bus.claim(count=2)
    assert probe.check() == {done: "active", dead: "active"}
    for state in ("active", "finished"):
        before = probe.snapshot()
        assert await bus.enqueue(done, lane="L", payload=b"d") is Admission.DUPLICATE
        assert await bus.enqueue(dead, lane="L", payload=b"x") is Admission.DUPLICATE
        assert await bus.enqueue(done, lane="L", payload=b"D") is Admission.CONFLICT
        assert await bus.enqueue(dead, lane="M", payload=b"x") is Admission.CONFLICT
        probe.check()
        probe.assert_unchanged(before, duplicate=2, conflict=2)
        if state == "active":
            await bus.complete(first)
            await bus.fail(second, "boom")
            assert probe.check() == {done: "done", dead: "dead"}


async def test_delay_puts_the_job_in_delayed_until_a_sweep_promotes_it(bus, probe):
    """A delayed job waits in delayed (not claimable) and a sweep after its due time moves it to its lane."""
    job = ids.mint("JOB")
    before_ms = probe.now_ms()
    assert await bus.enqueue(job, lane="PLR1", payload=b"later", delay_ms=60_000) is Admission.ADMITTED
    after_ms = probe.now_ms()
    assert probe.check() == {job: "delayed"}
    due = probe.members("delayed")[job]
    assert before_ms + 60_000 <= due <= after_ms + 60_000
    assert probe.ring() == []
    assert await bus.claim() == []
    probe.check()

    report = await bus.sweep()
    assert report.promoted == 0
    assert report.next_due_ms == due
    assert probe.check() == {job: "delayed"}

    probe.make_due(job)  # simulates the delay passing
    report = await bus.sweep()
    assert report.promoted == 1
    assert report.next_due_ms is None
    assert probe.check() == {job: "queued"}
    assert probe.ring() == ["PLR1"]
    [claim] = await bus.claim()
    assert claim.job == job
    assert claim.payload == b"later"
    assert probe.check() == {job: "active"}
    assert probe.counters()["promoted"] == 1


async def test_duplicate_of_a_delayed_job_changes_nothing(bus, probe):
    """A duplicate of a delayed job is DUPLICATE and does not make it claimable early."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="PLR1", payload=b"p", delay_ms=60_000)
    before = probe.snapshot()
    assert await bus.enqueue(job, lane="PLR1", payload=b"p") is Admission.DUPLICATE
    assert probe.check() == {job: "delayed"}
    probe.assert_unchanged(before, duplicate=1)


async def test_enqueue_many_reports_each_job(bus, probe):
    """enqueue_many admits new ids and reports duplicates and conflicts one by one, in order."""
    old = ids.mint("JOB")
    await bus.enqueue(old, lane="A", payload=b"old")
    new = [ids.mint("JOB") for _ in range(3)]
    admissions = await bus.enqueue_many(
        [
            NewJob(new[0], "A", b"1"),
            NewJob(old, "A", b"old"),
            NewJob(new[1], "B", b"2"),
            NewJob(old, "B", b"old"),
            NewJob(new[2], "A", b"3", delay_ms=60_000),
            NewJob(new[0], "A", b"1"),
        ]
    )
    assert admissions == [
        Admission.ADMITTED,
        Admission.DUPLICATE,
        Admission.ADMITTED,
        Admission.CONFLICT,
        Admission.ADMITTED,
        Admission.DUPLICATE,
    ]
    assert probe.check() == {old: "queued", new[0]: "queued", new[1]: "queued", new[2]: "delayed"}
    assert probe.lane("A") == [old, new[0]]
    counters = probe.counters()
    assert (counters["admitted"], counters["duplicate"], counters["conflict"]) == (4, 2, 1)


async def test_enqueue_many_of_nothing_sends_nothing(bus, probe):
    """enqueue_many of an empty iterable returns an empty list and leaves the bus untouched."""
    assert await bus.enqueue_many([]) == []
    assert probe.snapshot() == {}


async def test_empty_payload_is_a_payload(bus, probe):
    """An empty payload is admitted, and is delivered back as empty bytes."""
    job = ids.mint("JOB")
    assert await bus.enqueue(job, lane="L", payload=b"") is Admission.ADMITTED
    assert await bus.enqueue(job, lane="L", payload=b"") is Admission.DUPLICATE
    [claim] = await bus.claim()
    assert claim.payload == b""
    probe.check()


async def test_payload_bytes_are_kept_exactly(bus, probe):
    """A binary payload (NUL bytes, invalid UTF-8) comes back byte for byte; bytearray is accepted."""
    job = ids.mint("JOB")
    payload = bytes(range(256)) * 4
    assert await bus.enqueue(job, lane="L", payload=bytearray(payload)) is Admission.ADMITTED
    assert await bus.enqueue(job, lane="L", payload=payload) is Admission.DUPLICATE
    [claim] = await bus.claim()
    assert claim.payload == payload
    probe.check()


async def test_wake_tokens_are_capped(redis_server, sync_redis, tag):
    """Each admission pushes a wake token, but the wake list never holds more than wake_cap."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(wake_cap=3))
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    try:
        for n in range(1, 6):
            await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"")
            assert probe.wake_tokens() == min(n, 3)
            probe.check()
    finally:
        await bus.aclose()


async def test_jobs_of_two_buses_are_independent(redis_server, sync_redis, bus, probe):
    """The same id admitted on two tags is two jobs: each bus sees only its own keys."""
    other = Bus.from_url(redis_server.url, tag=bus.tag + "-other")
    try:
        job = ids.mint("JOB")
        assert await bus.enqueue(job, lane="L", payload=b"a") is Admission.ADMITTED
        assert await other.enqueue(job, lane="M", payload=b"b") is Admission.ADMITTED
        assert probe.check() == {job: "queued"}
        assert Probe(sync_redis, other.keys).check() == {job: "queued"}
        assert probe.ring() == ["L"]
    finally:
        await other.aclose()
