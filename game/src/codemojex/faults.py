"""Named fault points, armed only by the ``CODEMOJEX_FAULTS`` environment variable (tests, and the proof's
demo worker of ``codemojex serve --proof-crash``; never a normal run): a comma-separated list of ``point`` or
``point@probability`` (as :mod:`echomq.worker.faults`, whose draws ``ECHOMQ_FAULTS_SEED`` seeds). Unset, every
check is one dictionary lookup and false. The queue's own points (after claim, mid-handler, before the
acknowledgement, mid-extension) are :mod:`echomq.worker.faults`'s, armed by ``ECHOMQ_FAULTS``.

Points:

``score.after_effect``
    The score worker writes the guess record and its counts *without* completing the job, then the
    process kills itself with SIGKILL: the crash between effect and acknowledgement that the
    at-least-once queue must survive. The job is redelivered after its lease and scored once.

``score.after_effect.requested``
    The same crash, but only for a job the host marked with :func:`request_crash` (a one-shot trigger
    key, deleted when it fires, so the redelivery runs normally). ``codemojex serve --proof-crash`` arms
    it in the proof's demo worker only (the demo bus of :mod:`codemojex.proof`), for the proof page's
    "crash the worker mid-score" button, whose host sets the trigger in the demo keyspace only.

``score.before_effect``
    The score worker, having scored the guess but before running the script, stops its own process
    with SIGSTOP (every thread stops, the lease keeper too): the stalled worker whose lease is reaped
    and re-claimed. After SIGCONT it runs on with its old attempts token and is refused as stale.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

from echomq.worker.faults import Faults

if TYPE_CHECKING:
    from codemojex.game import Game

ENV = "CODEMOJEX_FAULTS"
REQUESTED = "score.after_effect.requested"
POINTS = frozenset({"score.after_effect", REQUESTED, "score.before_effect"})
TRIGGER_TTL_MS = 10 * 60 * 1000


_FAULTS = Faults(ENV, POINTS)


def armed(point: str) -> bool:
    """True if ``point`` is listed in ``$CODEMOJEX_FAULTS`` (whatever its probability)."""
    return _FAULTS.armed(point)


def fires(point: str) -> bool:
    """True if ``point`` is listed and this draw falls within its probability (1 if none is given)."""
    return _FAULTS.fires(point)


def crash() -> None:
    """Die now, as a SIGKILL does: no cleanup, no finally blocks, no goodbye to Redis."""
    os.kill(os.getpid(), signal.SIGKILL)


def stall() -> None:
    """Stop this whole process now, as SIGSTOP does; it runs on after a SIGCONT."""
    os.kill(os.getpid(), signal.SIGSTOP)


async def request_crash(game: Game, job: str) -> None:
    """Mark ``job`` so that a worker armed with ``score.after_effect.requested`` crashes after its effect
    (once: the trigger is taken when it fires, and expires unused after 10 minutes)."""
    from codemojex.game import translate_errors  # noqa: PLC0415  (keeps this module import-light)

    key = game.keys.fault(job)
    with translate_errors():
        await game.redis.set(key, b"crash", px=TRIGGER_TTL_MS)


async def take_crash_request(game: Game, job: str) -> bool:
    """True (once) if ``job`` was marked by :func:`request_crash`; the mark is deleted."""
    from codemojex.game import translate_errors  # noqa: PLC0415

    key = game.keys.fault(job)
    with translate_errors():
        return bool(await game.redis.delete(key))
