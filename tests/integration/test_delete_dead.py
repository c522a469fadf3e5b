"""delete_dead.lua through echomq.dead: a dead letter deleted for good, its id still remembered by its
tombstone for the dedup window; anything not dead left alone; the batch form and the blocking bus."""

from __future__ import annotations

import pytest

from echomq import (
    Admission,
    Bus,
    DeadDeletion,
    Deletion,
    Finish,
    InvalidId,
    InvalidOption,
    PartitionedBus,
    Settings,
    SyncBus,
    UnknownJob,
    ids,
)
from tests.support.probe import Probe


async def _dead(bus, probe, lane="L", payload=b"p"):
    """A job admitted on ``lane``, claimed once and failed for good; returns it and its last claim."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=payload, max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, "boom", delay_ms=0)
    assert probe.check()[job] == "dead"
    return job, claim


async def test_delete_dead_removes_the_dead_letter_and_leaves_its_tombstone(bus, probe):
    """The job leaves the dead set, its row is gone, a dead tombstone keeps its attempts for one dedup
    window from now, and the 'deleted' counter counts it."""
    job, _ = await _dead(bus, probe)
    before_ms = probe.now_ms()
    assert await bus.delete_dead(job) is Deletion.DELETED
    assert probe.members("dead") == {}
    assert probe.row(job) == {}
    tomb = probe.tombstone(job)
    assert tomb is not None
    assert (tomb.state, tomb.attempts) == (b"dead", 1)
    window = bus.settings.dedup_window_ms
    assert before_ms + window <= tomb.expires_ms <= probe.now_ms() + window
    assert probe.counters()["deleted"] == 1
    assert probe.check() == {job: "dead"}  # the tombstone, in no location
    info = await bus.inspect(job)
    assert (info.state.value, info.trimmed, info.payload) == ("dead", True, None)
    assert await bus.dead_jobs() == []
    assert (await bus.stats()).dead == 0


async def test_a_stale_producers_retry_of_a_deleted_job_is_absorbed(bus, probe):
    """After the delete, the same id with the same lane and payload is DUPLICATE, with another payload
    CONFLICT; no job is queued again, and the claim from before its death still cannot finish it."""
    job, claim = await _dead(bus, probe, payload=b"original")
    await bus.delete_dead(job)
    before = probe.snapshot()
    assert await bus.enqueue(job, lane="L", payload=b"original") is Admission.DUPLICATE
    assert await bus.enqueue(job, lane="L", payload=b"other") is Admission.CONFLICT
    assert await bus.complete(claim) is Finish.STALE
    probe.assert_unchanged(before, duplicate=1, conflict=1, stale=1)
    assert await bus.claim() == []


async def test_delete_dead_of_a_job_that_is_not_dead_changes_nothing(bus, probe):
    """A queued, active or done job (and a done tombstone) is REFUSED, and nothing is written, not
    even a counter."""
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"")
    for step in ("queued", "active", "done"):
        before = probe.snapshot()
        assert await bus.delete_dead(job) is Deletion.REFUSED
        assert probe.check() == {job: step}
        probe.assert_unchanged(before)
        if step == "queued":
            [claim] = await bus.claim()
        elif step == "active":
            await bus.complete(claim)


async def test_a_repeated_delete_answers_already_and_changes_nothing(bus, probe):
    """The second delete of a job (what the retry of a call whose reply was lost sends) finds its
    tombstone and answers ALREADY; no key changes."""
    job, _ = await _dead(bus, probe)
    assert await bus.delete_dead(job) is Deletion.DELETED
    before = probe.snapshot()
    assert await bus.delete_dead(job) is Deletion.ALREADY
    probe.assert_unchanged(before)


async def test_bad_or_unknown_ids_raise_and_change_nothing(bus, probe):
    """An ill-formed id raises InvalidId, an id never admitted UnknownJob; nothing changes."""
    await _dead(bus, probe)
    before = probe.snapshot()
    for bad in ("JOB-not-an-id", "", "JOB" + "0" * 22 + "\ud800", "PLR00000000000000000000000"):
        with pytest.raises(InvalidId):
            await bus.delete_dead(bad)
    with pytest.raises(UnknownJob):
        await bus.delete_dead(ids.mint("JOB"))
    probe.assert_unchanged(before)


async def test_a_dead_letter_that_is_then_retried_cannot_be_deleted(bus, probe):
    """retry_dead then delete_dead: the job is queued again, so the delete is REFUSED and it stays."""
    job, _ = await _dead(bus, probe)
    assert await bus.retry_dead(job) is True
    assert await bus.delete_dead(job) is Deletion.REFUSED
    assert probe.check() == {job: "queued"}


async def test_without_a_dedup_window_nothing_remembers_a_deleted_id(redis_server, sync_redis, tag):
    """With dedup_window_ms=0 the delete leaves no tombstone: a repeated delete raises UnknownJob and
    the id may be admitted anew (as Settings documents for every finished id)."""
    async with Bus.from_url(redis_server.url, tag=tag, settings=Settings(dedup_window_ms=0)) as bus:
        probe = Probe(sync_redis, bus.keys)
        probe.watch(bus)
        job, _ = await _dead(bus, probe)
        assert await bus.delete_dead(job) is Deletion.DELETED
        assert probe.tombstone(job) is None
        with pytest.raises(UnknownJob):
            await bus.delete_dead(job)
        assert await bus.enqueue(job, lane="L", payload=b"p") is Admission.ADMITTED


async def test_delete_all_dead_deletes_a_snapshot_in_batches(bus, probe):
    """delete_all_dead deletes every dead job, oldest death first, in batches, reports them, and leaves a
    foreign entry of the dead set and the other jobs alone."""
    jobs = [(await _dead(bus, probe, lane=f"L{i}"))[0] for i in range(5)]
    queued = ids.mint("JOB")
    await bus.enqueue(queued, lane="Q", payload=b"")
    probe.client.zadd(bus.keys.dead, {"not-a-job-id": 0})
    report = await bus.delete_all_dead(batch=2)
    assert report == DeadDeletion(listed=5, deleted=tuple(jobs))
    assert probe.counters()["deleted"] == 5
    assert probe.members("dead") == {"not-a-job-id": 0}
    probe.client.zrem(bus.keys.dead, "not-a-job-id")
    assert probe.check() == {**dict.fromkeys(jobs, "dead"), queued: "queued"}
    assert [probe.row(job) for job in jobs] == [{}] * 5
    assert await bus.delete_all_dead() == DeadDeletion(listed=0, deleted=())
    with pytest.raises(InvalidOption):  # a batch out of range
        await bus.delete_all_dead(batch=0)


async def test_the_blocking_bus_deletes_dead_letters_too(redis_server, bus, probe, tag):
    """SyncBus.delete_dead and delete_all_dead run the same script with the same answers."""
    first, _ = await _dead(bus, probe, lane="A")
    second, _ = await _dead(bus, probe, lane="B")
    with SyncBus.from_url(redis_server.url, tag=tag) as sync_bus:
        assert sync_bus.dead_jobs()[0][0] == first
        assert sync_bus.delete_dead(first) is Deletion.DELETED
        assert sync_bus.delete_dead(first) is Deletion.ALREADY
        with pytest.raises(InvalidId):
            sync_bus.delete_dead("nope")
        assert sync_bus.delete_all_dead() == DeadDeletion(listed=1, deleted=(second,))
    assert probe.check() == {first: "dead", second: "dead"}
    assert probe.members("dead") == {}


async def test_a_partitioned_bus_deletes_from_the_partition_that_holds_the_job(redis_server, tag):
    """PartitionedBus.delete_dead finds the job's partition; delete_all_dead covers every partition."""
    async with PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3) as pbus:
        jobs = []
        for lane in ("a", "b", "c", "d"):
            job = ids.mint("JOB")
            await pbus.enqueue(job, lane=lane, payload=b"", max_attempts=1)
            [claim] = await pbus.claim()
            await pbus.fail(claim, "boom")
            jobs.append(job)
        assert await pbus.delete_dead(jobs[0]) is Deletion.DELETED
        assert await pbus.delete_dead(jobs[0]) is Deletion.ALREADY
        with pytest.raises(UnknownJob):
            await pbus.delete_dead(ids.mint("JOB"))
        report = await pbus.delete_all_dead()
        assert sorted(report.deleted) == sorted(jobs[1:])
        assert await pbus.dead_jobs() == []
