"""What a handler receives and returns, and the outcomes a worker counts (:mod:`echomq.worker.runner`
runs the handlers; :mod:`echomq.worker.processor` runs one job)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from echomq.jobs import Claim
from echomq.states import Finish

HandlerResult = bytes | Finish | None
Handler = Callable[["Job"], Awaitable[HandlerResult]] | Callable[["Job"], HandlerResult]
# Called (awaited) after this worker's fail() dead-lettered a job; see Worker's on_dead.
DeadHook = Callable[["Job"], Awaitable[None]]


@dataclass(frozen=True, slots=True, eq=False)
class Job:
    """What a handler receives: one claimed job, and the event that says this run lost it."""

    claim: Claim
    revoked: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def id(self) -> str:
        return self.claim.job

    @property
    def lane(self) -> str:
        return self.claim.lane

    @property
    def payload(self) -> bytes:
        return self.claim.payload

    @property
    def attempt(self) -> int:
        """The attempts token of this claim (1 for the first delivery)."""
        return self.claim.token

    @property
    def tries(self) -> int:
        """Tries spent against ``max_attempts``, this one included."""
        return self.claim.tries

    @property
    def max_attempts(self) -> int:
        return self.claim.max_attempts

    @property
    def deadline_ms(self) -> int:
        """The lease deadline at claim time (server ms); the lease keeper pushes it on."""
        return self.claim.deadline_ms


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
