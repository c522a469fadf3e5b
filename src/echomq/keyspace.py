"""Every Redis key of a bus is built here, and only here.

A bus with tag ``cm`` lives under ``emq:{cm}:``. The braces are a Redis Cluster hash tag, so every key
of one bus hashes to one slot and every multi-key script runs on one server, on a single node or on a
cluster. Builders validate what they are given and raise a typed error on ill-formed input, so no
caller can build a key from unchecked input: :meth:`Keyspace.job` raises :class:`InvalidId` on an
ill-formed JOB id, :meth:`Keyspace.lane` raises :class:`InvalidLane` on an ill-formed lane name.

=====================  ======  ===========================================================
key                    type    holds
=====================  ======  ===========================================================
``job:<JOB>``          hash    the row: state, lane, payload, attempts (fencing token), ...
                               in one-letter fields, see :mod:`echomq.rows`
``tomb:<7 digits>``    hash    tombstones of the finished ids minted in one ~65 s (the id's
                               body's first 7 digits): rest of the id (10 bytes) -> digest,
                               state, attempts, expiry; expires with its latest tombstone
``lane:<lane>``        zset    queued job ids; score = priority, ties by id (mint order)
``ring``               list    the serviceable lanes, each once; in the ring iff non-empty
``active``             zset    claimed job ids scored by lease deadline (server ms)
``delayed``            zset    retries and scheduled jobs scored by due time (server ms)
``done`` / ``dead``    zset    finished / dead-lettered ids scored by finish time
``wake``               list    wake-up tokens for the blocking pickup
``stats``              hash    outcome counters, incremented inside the scripts
``waiting``            hash    lane -> claim serial since it waits (its fairness lag)
``sweep:lock``         string  held for one sweep period so N workers sweep about once
``claim:<request>``    string  what one claim claimed ('id token ...'), for one lease: its retry's answer
``flow``               hash    flow-control settings: pauses, lane caps, rates (``echomq.flow``)
``held``               set     lanes a gate (pause, cap, rate) keeps out of the ring
``lane-active``        hash    lane -> its active jobs, for capped lanes (rows marked ``K``)
``throttled``          zset    lanes over their rate, scored by when their window frees a claim
``rate``, ``rate:<l>`` zset    the claims of the bus's / a lane's rate window (``id:token`` -> ms)
``signal:<JOB>``       list    wake-up tokens for the callers waiting for a job's end (1 min)
``slot-probe:1``, 2    --      never written: a script reads both to learn whether the slot
                               is being resharded (``lua/includes/slot.lua``)
=====================  ======  ===========================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from echomq import ids
from echomq.errors import InvalidLane, InvalidOption, InvalidTag

JOB_BRAND = "JOB"
TOMB_DIGITS = 7  # digits of an id's body naming its tombstones' hash: 2**16 ms of mint time each
_TAG = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_LANE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_REQUEST = re.compile(r"[A-Za-z0-9_.:-]{0,64}")


def check_tag(tag: object) -> str:
    """Return ``tag`` if it is 1-32 characters of ``[A-Za-z0-9_.-]``, else raise :class:`InvalidTag`."""
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise InvalidTag(f"a bus tag is 1-32 characters of [A-Za-z0-9_.-], got {tag!r}")
    return tag


def check_lane(lane: object) -> str:
    """Return ``lane`` if it is 1-128 characters of ``[A-Za-z0-9_.:-]``, else raise :class:`InvalidLane`."""
    if not isinstance(lane, str) or not _LANE.fullmatch(lane):
        shown = lane if not isinstance(lane, str) or len(lane) <= 40 else lane[:40] + "..."
        raise InvalidLane(f"a lane name is 1-128 characters of [A-Za-z0-9_.:-], got {shown!r}")
    return lane


def check_request(request: object) -> str:
    """Return ``request`` if it is 0-64 characters of ``[A-Za-z0-9_.:-]``, else raise InvalidOption."""
    if not isinstance(request, str) or not _REQUEST.fullmatch(request):
        raise InvalidOption(f"a claim request id is 0-64 of [A-Za-z0-9_.:-], got {request!r}")
    return request


@dataclass(frozen=True, slots=True)
class Keyspace:
    """The keys of the bus with ``tag``; construct with an unchecked tag and it is checked."""

    tag: str
    prefix: str = field(init=False)

    def __post_init__(self) -> None:
        check_tag(self.tag)
        object.__setattr__(self, "prefix", f"emq:{{{self.tag}}}:")

    def job(self, job_id: str) -> str:
        """The row of ``job_id``; raises :class:`InvalidId` unless it is a well-formed JOB id."""
        return f"{self.prefix}job:{ids.check(job_id, JOB_BRAND)}"

    def tombstone(self, job_id: str) -> tuple[str, bytes]:
        """The hash and the field that hold the tombstone of ``job_id`` once its row is trimmed
        (``lua/includes/row.lua``); raises :class:`InvalidId` unless it is a well-formed JOB id."""
        ids.check(job_id, JOB_BRAND)
        rest = job_id[3 + TOMB_DIGITS :]  # 16 digits: 80 bits, 10 bytes
        value = 0
        for digit in rest:
            value = value * 32 + ids.ALPHABET.index(digit)
        return f"{self.prefix}tomb:{job_id[3 : 3 + TOMB_DIGITS]}", value.to_bytes(10, "big")

    def tombstone_job(self, key: bytes | str, field: bytes) -> str:
        """The JOB id whose tombstone is ``field`` of the hash ``key`` (the inverse of :meth:`tombstone`)."""
        text = key.decode() if isinstance(key, bytes) else key
        value = int.from_bytes(field, "big")
        rest = "".join(ids.ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(16)))
        return f"{JOB_BRAND}{text[len(self.prefix) + len('tomb:') :]}{rest}"

    def lane(self, lane: str) -> str:
        """The queued set of ``lane``; raises :class:`InvalidLane` on an ill-formed name."""
        return f"{self.prefix}lane:{check_lane(lane)}"

    @property
    def ring(self) -> str:
        return f"{self.prefix}ring"

    @property
    def active(self) -> str:
        return f"{self.prefix}active"

    @property
    def delayed(self) -> str:
        return f"{self.prefix}delayed"

    @property
    def done(self) -> str:
        return f"{self.prefix}done"

    @property
    def dead(self) -> str:
        return f"{self.prefix}dead"

    @property
    def wake(self) -> str:
        return f"{self.prefix}wake"

    @property
    def stats(self) -> str:
        return f"{self.prefix}stats"

    @property
    def layout(self) -> str:
        """A partition's place in its partitioned bus, ``i/P`` (:mod:`echomq.partitions`)."""
        return f"{self.prefix}layout"

    @property
    def waiting(self) -> str:
        """Hash: lane -> the claim serial since which it waits for service (its fairness lag)."""
        return f"{self.prefix}waiting"

    @property
    def flow(self) -> str:
        """Hash: the bus's flow-control settings (:mod:`echomq.flow`)."""
        return f"{self.prefix}flow"

    @property
    def held(self) -> str:
        """Set: the lanes a gate (pause, cap, rate) keeps out of the ring."""
        return f"{self.prefix}held"

    @property
    def lane_active(self) -> str:
        """Hash: lane -> its active jobs, kept for capped lanes."""
        return f"{self.prefix}lane-active"

    @property
    def throttled(self) -> str:
        """Zset: lanes over their rate, scored by when their window frees a claim (server ms)."""
        return f"{self.prefix}throttled"

    def signal(self, job_id: str) -> str:
        """List: the tokens that wake the callers waiting for ``job_id``'s end (:mod:`echomq.results`)."""
        return f"{self.prefix}signal:{ids.check(job_id, JOB_BRAND)}"

    @property
    def sweep_lock(self) -> str:
        return f"{self.prefix}sweep:lock"

    def claim_record(self, request: str) -> str:
        """What the claim with ``request`` claimed (for its retry); the empty request names a key that
        is never written. Raises :class:`InvalidOption` on an ill-formed request id."""
        return f"{self.prefix}claim:{check_request(request)}"

    @property
    def pattern(self) -> str:
        """A SCAN pattern matching every key of this bus (for inspection and tests)."""
        return f"emq:{{{self.tag}}}:*"
