"""Named fault points, armed only by the ``CODEMOJEX_FAULTS`` environment variable (tests, never normal
runs): a comma-separated list of point names. Unset, every check is one dictionary lookup and false.

Points:

``score.after_effect``
    The score worker writes the guess record and its counts *without* completing the job, then the
    process kills itself with SIGKILL: the crash between effect and acknowledgement that the
    at-least-once queue must survive. The job is redelivered after its lease and scored once.

``score.before_effect``
    The score worker, having scored the guess but before running the script, stops its own process
    with SIGSTOP (every thread stops, the lease keeper too): the stalled worker whose lease is reaped
    and re-claimed. After SIGCONT it runs on with its old attempts token and is refused as stale.
"""

from __future__ import annotations

import os
import signal

ENV = "CODEMOJEX_FAULTS"
POINTS = frozenset({"score.after_effect", "score.before_effect"})


def armed(point: str) -> bool:
    """True if ``point`` is listed in ``$CODEMOJEX_FAULTS``."""
    if point not in POINTS:
        raise KeyError(f"no fault point named {point!r}")
    listed = os.environ.get(ENV, "")
    return bool(listed) and point in {name.strip() for name in listed.split(",")}


def crash() -> None:
    """Die now, as a SIGKILL does: no cleanup, no finally blocks, no goodbye to Redis."""
    os.kill(os.getpid(), signal.SIGKILL)


def stall() -> None:
    """Stop this whole process now, as SIGSTOP does; it runs on after a SIGCONT."""
    os.kill(os.getpid(), signal.SIGSTOP)
