"""What a handler receives and returns, and the outcomes a worker counts (:mod:`echomq.worker.runner`
runs the handlers; :mod:`echomq.worker.processor` runs one job)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from echomq.effects import Completion, Effects
from echomq.jobs import Claim
from echomq.states import Finish

# bytes or None: complete with that result; Effects or Completion: complete with effects in one step
# (echomq.effects); Finish: the handler finished the job itself (see echomq.worker.processor).
HandlerResult = bytes | Finish | Effects | Completion | None
Handler = Callable[["Job"], Awaitable[HandlerResult]] | Callable[["Job"], HandlerResult]
# Called (awaited) after this worker's fail() dead-lettered a job; see Worker's on_dead.
DeadHook = Callable[["Job"], Awaitable[None]]


_REVOKED_LOCK = threading.Lock()  # makes a Job's revoked event once, whichever thread asks first


class Job:
    """What a handler receives: one claimed job, and the event that says this run lost it.

    ``revoked`` is made on first use (most runs never look at it, and an Event costs a lock and a
    condition), by whichever thread asks first: the handler, the lease keeper, the worker.
    """

    __slots__ = ("_claim", "_revoked")

    def __init__(self, claim: Claim, revoked: threading.Event | None = None) -> None:
        self._claim = claim
        self._revoked = revoked

    def __repr__(self) -> str:
        return f"Job(claim={self._claim!r})"

    @property
    def claim(self) -> Claim:
        return self._claim

    @property
    def revoked(self) -> threading.Event:
        """Set when this run no longer owns the job (see :mod:`echomq.worker`)."""
        event = self._revoked
        if event is None:
            with _REVOKED_LOCK:
                if self._revoked is None:
                    self._revoked = threading.Event()
                event = self._revoked
        return event

    @property
    def id(self) -> str:
        return self._claim.job

    @property
    def lane(self) -> str:
        return self._claim.lane

    @property
    def payload(self) -> bytes:
        return self._claim.payload

    @property
    def attempt(self) -> int:
        """The attempts token of this claim (1 for the first delivery)."""
        return self._claim.token

    @property
    def tries(self) -> int:
        """Tries spent against ``max_attempts``, this one included."""
        return self._claim.tries

    @property
    def max_attempts(self) -> int:
        return self._claim.max_attempts

    @property
    def deadline_ms(self) -> int:
        """The lease deadline at claim time (server ms); the lease keeper pushes it on."""
        return self._claim.deadline_ms


@dataclass(slots=True)
class WorkerCounts:
    """Outcomes since the worker started (read them for a dashboard or a demo)."""

    claimed: int = 0
    completed: int = 0
    failed: int = 0  # fail() calls that landed: retrying or dead
    dead: int = 0  # of those, dead-lettered
    stale: int = 0  # finishes refused: the lease was no longer this worker's
    timed_out: int = 0
    released: int = 0
    revoked: int = 0
