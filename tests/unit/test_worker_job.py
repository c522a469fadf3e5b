"""echomq.worker.handler.Job: what a handler receives, and its revoked event made on first use."""

from __future__ import annotations

import threading

from echomq.jobs import Claim
from echomq.worker.handler import Job

CLAIM = Claim("JOB00T4DNACVZ2ZHNF7M2Z3X99", "lane", 3, b"p", 1234, 2, 5, "req")


def test_job_reads_its_claim():
    """A Job's fields are its claim's: id, lane, payload, attempt (the token), tries, max, deadline."""
    job = Job(CLAIM)
    assert (job.id, job.lane, job.payload, job.attempt) == (CLAIM.job, "lane", b"p", 3)
    assert (job.tries, job.max_attempts, job.deadline_ms, job.claim) == (2, 5, 1234, CLAIM)


def test_revoked_is_one_event_for_every_thread_that_asks():
    """Made on first use, the revoked event is the same object for every caller, whichever thread asks
    first, so a set() by the lease keeper is seen by the handler."""
    job = Job(CLAIM)
    seen: list[threading.Event] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        seen.append(job.revoked)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(event) for event in seen}) == 1
    assert not job.revoked.is_set()
    seen[0].set()
    assert job.revoked.is_set()


def test_a_given_revoked_event_is_used():
    """Job(claim, revoked) keeps the caller's event."""
    event = threading.Event()
    assert Job(CLAIM, event).revoked is event
