"""Handlers that the worker subprocesses of the fault tests run (``echomq worker tests.faults.handlers:...``).

Each one leaves marker files in ``$ECHOMQ_TEST_MARKERS`` (``<job>.<attempt>.started`` / ``.finished``),
so a test knows when a job is mid-run in another process and how many runs there were.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from echomq import Job

LONG_S = 600.0  # "forever" for a test: the run is killed or released long before


def _mark(job: Job, what: str) -> None:
    folder = os.environ.get("ECHOMQ_TEST_MARKERS")
    if folder:
        Path(folder, f"{job.id}.{job.attempt}.{what}").touch()


def slow_first_attempt(job: Job) -> bytes:
    """Blocks on the first delivery (until killed, released or revoked); later deliveries finish at once."""
    _mark(job, "started")
    if job.attempt == 1:
        job.revoked.wait(LONG_S)
        time.sleep(0.1)
    _mark(job, "finished")
    return b"done"


def noop(job: Job) -> None:
    """Finishes at once."""
    _mark(job, "finished")
