"""The canonical job states, the outcome values, and the one list of counted events.

A job is in exactly one location at every instant, and its row's ``state`` names it:

===========  ========================  ==============================================
state        location                  entered by
===========  ========================  ==============================================
queued       ``lane:<lane>`` (zset)    enqueue, sweep (expired lease), release, fail
                                       without delay, promotion of a due delayed job,
                                       retry of a dead job
delayed      ``delayed`` (zset)        enqueue with a delay, fail with backoff
active       ``active`` (zset)         claim
done         ``done`` (zset)           complete; later trimmed to a tombstone
dead         ``dead`` (zset)           fail past max attempts, sweep past max attempts
===========  ========================  ==============================================

Outcomes a caller matches on are enums here, never exceptions: a duplicate admission is
``Admission.DUPLICATE``, a refused finish is ``Finish.STALE``, a lease that another worker took over is
``Lease.REVOKED``.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    QUEUED = "queued"
    DELAYED = "delayed"
    ACTIVE = "active"
    DONE = "done"
    DEAD = "dead"


class Admission(StrEnum):
    """What :func:`echomq.jobs.enqueue` did."""

    ADMITTED = "admitted"  # a new row; the job is queued or delayed
    DUPLICATE = "duplicate"  # the row exists with the same lane and payload; nothing changed
    CONFLICT = "conflict"  # the row exists with another lane or payload; nothing changed


class Finish(StrEnum):
    """What :func:`echomq.finish.complete` did."""

    DONE = "done"  # also the answer to a retry whose first call completed the job (its reply was lost)
    STALE = "stale"  # the token is not the job's current claim: another owner, or not active


class Failure(StrEnum):
    """What :func:`echomq.finish.fail` did."""

    RETRYING = "retrying"  # back to its lane at once, or in delayed for its backoff
    DEAD = "dead"  # past max attempts (or not retryable): dead-lettered
    STALE = "stale"


class Lease(StrEnum):
    """What :func:`echomq.finish.extend` did."""

    EXTENDED = "extended"
    FINISHED = "finished"  # this very claim already completed the job: nothing left to renew
    REVOKED = "revoked"  # the lease was reaped (and maybe re-claimed): stop before any side effect


class Control(StrEnum):
    """What :func:`echomq.control.cancel` and :func:`echomq.control.revoke` did."""

    DONE = "done"  # cancelled (revoked) now, or by this very call before its reply was lost
    REFUSED = "refused"  # not in a state it applies to (see the call); nothing changed


class Deletion(StrEnum):
    """What :func:`echomq.dead.delete_dead` did."""

    DELETED = "deleted"  # the dead letter is deleted now (its tombstone remains for the dedup window)
    ALREADY = "already"  # no dead letter left: deleted before (by this very call, its reply lost), or trimmed
    REFUSED = "refused"  # not dead (queued, delayed, active, done): nothing changed


class Release(StrEnum):
    """What :func:`echomq.finish.release` did."""

    RELEASED = "released"
    STALE = "stale"


# Every counter in the ``stats`` hash, incremented inside the script that causes it, so the counts
# are always consistent with the state.
COUNTERS: tuple[str, ...] = (
    "admitted",  # enqueue: a new row
    "duplicate",  # enqueue: same id, same lane and payload
    "conflict",  # enqueue: same id, other lane or payload
    "claimed",  # claim: a job moved to active (also the serial that fairness lag is measured in)
    "replayed",  # claim retried after a lost reply: a job it had claimed handed out again, no new try
    "unrecorded",  # claim with a request id that could keep no record (its record key on another node)
    "completed",  # complete: active -> done
    "stale",  # complete / fail / release refused for a stale token
    "retried",  # fail: active -> lane or delayed
    "dead",  # fail or sweep: -> dead
    "reclaimed",  # sweep: an expired lease returned to its lane
    "released",  # release: active -> lane, the try not counted
    "extended",  # extend: a lease renewed
    "revoked",  # extend refused: the lease is no longer the caller's
    "promoted",  # a due delayed job moved to its lane
    "resurrected",  # retry_dead: dead -> lane
    "deleted",  # delete_dead: a dead letter deleted (its tombstone left)
    "trimmed",  # sweep, complete, or a fail that dead-letters: a finished row reduced to a tombstone
    "slot_moving",  # claim / sweep / retry_dead stopped before a key on another node (slot resharded)
    "cancelled",  # cancel: a queued or delayed job dead-lettered before any claim
    "revocations",  # revoke: an active job taken from its worker and dead-lettered
)
