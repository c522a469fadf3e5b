"""Handlers the benchmark's worker processes run (``echomq worker bench.handlers:NAME``)."""

from __future__ import annotations

import time

from echomq import Job


async def noop(job: Job) -> None:
    """Do nothing: the queue's own cost is what is measured."""


async def stamp(job: Job) -> bytes:
    """Return the wall-clock ns at which the handler started (for pickup latency)."""
    return str(time.time_ns()).encode()
