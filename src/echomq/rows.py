"""The job row as stored, and its documented names: the one place that maps one to the other.

A row is a small Redis hash, kept compact (a listpack; a ziplist on Redis 6.2) only while every field and
value is at most 64 bytes and it has at most 512 fields: Redis's defaults, which EchoMQ never changes.
So the stored field names are one letter, a field at its default is left out, and the payload is split
into chunks of at most :data:`CHUNK` bytes in the fields ``1``, ``2``, ... (``lua/includes/row.lua``
writes and reads them). Read a row with ``HGETALL`` and :func:`decode` it; read one field with the
constants here (``HGET key rows.STATE``).

======  ============  ==============================================================
field   name          holds
======  ============  ==============================================================
``s``   state         absent while queued; delayed, active, done, dead
``l``   lane          always present: a row exists iff it has ``l``
``1``.. payload       in chunks of at most 64 bytes (gone from a tombstone)
``g``   digest        8 bytes, the admission digest: the caller's (codemojex's request
                      digest) or, on a tombstone, the payload's; absent on a whole row
                      admitted by ``enqueue`` (the first 8 bytes of the payload's sha1)
``a``   attempts      the fencing token (absent: 0)
``t``   tries         spent against max attempts (absent: 0)
``m``   max           max attempts
``p``   priority      absent: 0
``d``   deadline      lease deadline (server ms) while active
``c``   claimed_at    server ms of the latest claim
``o``   owner         the claiming worker
``r``   request       the claim call's request id (the fence)
``u``   due           the due time (ms) a promoted job waits since
``k``   late          ms from the due time to the claim that started it
``f``   finished      server ms of the finish
``e``   error         the latest failure
``x``   result        the handler's result
``n``   ended         how the latest claims ended (``lua/includes/ended.lua``)
``b``   retried_by    the request id that last retried the dead job
``T``   trimmed       server ms of the trim: the row is a tombstone
``w``   admitted      server ms of the admission, when the application writes it
``K``   capped        the claim was counted against its lane's cap (``echomq.flow``)
``W``   waiters       callers waiting for the job's end (``echomq.results``)
``z``   ended_by      the request id of the cancel or revoke that ended it (``echomq.control``)
======  ============  ==============================================================

A job's admission time in :class:`echomq.inspection.JobInfo` is ``w`` when present, else its id's mint time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CHUNK = 64  # bytes of payload per field: Redis's hash-max-listpack-value default

STATE = "s"
LANE = "l"
PAYLOAD = "1"  # the first chunk: see payload_of
DIGEST = "g"
ATTEMPTS = "a"
TRIES = "t"
MAX = "m"
PRIORITY = "p"
DEADLINE = "d"
CLAIMED_AT = "c"
OWNER = "o"
REQUEST = "r"
DUE = "u"
LATE = "k"
FINISHED = "f"
ERROR = "e"
RESULT = "x"
ENDED = "n"
RETRIED_BY = "b"
TRIMMED = "T"
ADMITTED = "w"
CAPPED = "K"
WAITERS = "W"
ENDED_BY = "z"

NAMES: dict[str, str] = {
    STATE: "state",
    LANE: "lane",
    DIGEST: "digest",
    ATTEMPTS: "attempts",
    TRIES: "tries",
    MAX: "max",
    PRIORITY: "priority",
    DEADLINE: "deadline",
    CLAIMED_AT: "claimed_at",
    OWNER: "owner",
    REQUEST: "request",
    DUE: "due",
    LATE: "late",
    FINISHED: "finished",
    ERROR: "error",
    RESULT: "result",
    ENDED: "ended",
    RETRIED_BY: "retried_by",
    TRIMMED: "trimmed",
    ADMITTED: "created",
    CAPPED: "capped",
    WAITERS: "waiters",
    ENDED_BY: "ended_by",
}

QUEUED = b"queued"


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What a trimmed job leaves in its tombstones' hash (:meth:`echomq.keyspace.Keyspace.tombstone`):
    its state (done or dead), its attempts (the last token) and when it stops counting (server ms)."""

    state: bytes
    attempts: int
    expires_ms: int


def parse_tombstone(value: bytes | None) -> Tombstone | None:
    """A tombstone's value (8 digest bytes, ``d`` or ``x``, ``<attempts>:<expiry ms>``), or None."""
    if value is None or len(value) < 12:
        return None
    attempts, _, expires = value[9:].partition(b":")
    state = b"dead" if value[8:9] == b"x" else b"done"
    return Tombstone(state, int(attempts), int(expires))


def _key(field: bytes | str) -> str:
    return field.decode() if isinstance(field, bytes) else field


def payload_of(raw: Mapping[bytes, bytes] | Mapping[str, bytes]) -> bytes | None:
    """The payload of a row read with HGETALL (its chunks joined), or None for a tombstone or no row."""
    chunks = {_key(k): v for k, v in raw.items() if _key(k).isdigit()}
    if "1" not in chunks:
        return None
    return b"".join(chunks[str(i)] for i in range(1, len(chunks) + 1) if str(i) in chunks)


def state_of(state: bytes | None, lane: bytes | None) -> bytes | None:
    """A row's state from its ``s`` and ``l`` fields (HMGET key s l): None when there is no row."""
    if lane is None:
        return None
    return state if state is not None else QUEUED


def decode(raw: Mapping[bytes, bytes]) -> dict[str, bytes]:
    """A row read with HGETALL under its documented names (``state``, ``lane``, ``payload``, ...), with
    the fields left out at their default filled in (state queued; attempts, tries and, but on a
    tombstone, priority 0); ``{}`` when there is no row."""
    if b"l" not in raw:
        return {}
    row = {NAMES[_key(k)]: v for k, v in raw.items() if _key(k) in NAMES}
    row.setdefault("state", QUEUED)
    for name in ("attempts", "tries") if "trimmed" in row else ("attempts", "tries", "priority"):
        row.setdefault(name, b"0")  # left out at their default
    payload = payload_of(raw)
    if payload is not None:
        row["payload"] = payload
    return row
