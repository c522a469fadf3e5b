"""Handlers that return their effects (echomq.Effects) for the worker subprocesses of the effects fault
tests (``echomq worker tests.faults.effects_handlers:...``).

Each counts its run in ``app:fx:<JOB>:runs`` and appends its attempt to ``app:fx:<JOB>:log``, as effects
applied with the completion, and leaves the marker files of :mod:`tests.faults.handlers`.
"""

from __future__ import annotations

from echomq import Completion, Effects, Job
from tests.faults.handlers import LONG_S, _mark


def runs_key(job: str) -> str:
    return f"app:fx:{job}:runs"


def log_key(job: str) -> str:
    return f"app:fx:{job}:log"


def _effects(job: Job) -> Completion:
    fx = Effects().incrby(runs_key(job.id), 1).rpush(log_key(job.id), job.attempt)
    return Completion(f"attempt {job.attempt}".encode(), fx)


def effects_at_once(job: Job) -> Completion:
    """Returns its effects at once."""
    _mark(job, "started")
    _mark(job, "finished")
    return _effects(job)


def effects_after_first_revoked(job: Job) -> Completion:
    """The first delivery blocks until this run loses the job (killed, stopped past its lease), then
    returns its effects all the same, as a careless handler would; later deliveries return at once."""
    _mark(job, "started")
    if job.attempt == 1:
        job.revoked.wait(LONG_S)
    _mark(job, "finished")
    return _effects(job)
