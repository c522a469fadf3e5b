"""A blocking view of one bus's real Redis state, for assertions in the integration tests.

The probe reads keys directly (it never goes through the scripts under test) and offers the two ways
the tests move time forward without sleeping:

* :meth:`Probe.expire` sets a job's score in ``active`` to 0, which simulates its lease running out:
  the sweep compares that score with the server clock, so the lease is then past, as if time passed.
* :meth:`Probe.make_due` does the same in ``delayed``: the job's due time is then in the past.
"""

from __future__ import annotations

from typing import Any

import redis

from echomq import rows
from echomq.keyspace import Keyspace
from tests.support import invariants

Snapshot = dict[str, tuple[str, Any]]


class Probe:
    """Reads (and, for simulated time, nudges) the keys of the bus with ``keys``."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self.client = client
        self.keys = keys

    # -- the invariants -------------------------------------------------------------------------

    def check(self) -> dict[str, str]:
        """Assert both invariants (one location per job; ring iff non-empty); return id -> state."""
        return invariants.check(self.client, self.keys)

    def watch(self, bus: Any) -> Any:
        """Make ``bus`` assert both invariants after every script it runs, so no step goes unchecked.

        The real scripts still run on the real server; this only observes. Scripts queued on a
        pipeline (enqueue_many) run when the pipeline executes, so that call is checked after it.
        """
        run, many = bus.scripts.run, bus.enqueue_many

        async def run_and_check(name: str, keys: list[str], args: list[Any], client: Any = None) -> Any:
            reply = await run(name, keys, args, client=client)
            if client is None:
                self.check()
            return reply

        async def enqueue_many_and_check(new_jobs: Any) -> Any:
            admissions = await many(new_jobs)
            self.check()
            return admissions

        bus.scripts.run = run_and_check
        bus.enqueue_many = enqueue_many_and_check
        return bus

    # -- simulated time -------------------------------------------------------------------------

    def expire(self, job: str) -> None:
        """Move ``job``'s lease deadline to the epoch: simulates its lease running out."""
        self.client.zadd(self.keys.active, {job: 0}, xx=True)
        assert self.client.zscore(self.keys.active, job) == 0, f"{job} is not active"

    def make_due(self, job: str) -> None:
        """Move ``job``'s due time to the epoch: simulates its delay passing."""
        self.client.zadd(self.keys.delayed, {job: 0}, xx=True)
        assert self.client.zscore(self.keys.delayed, job) == 0, f"{job} is not delayed"

    # -- reading state --------------------------------------------------------------------------

    def now_ms(self) -> int:
        """The server clock in ms, as the scripts read it (TIME)."""
        seconds, micros = self.client.time()
        return int(seconds) * 1000 + int(micros) // 1000

    def row(self, job: str) -> dict[str, bytes]:
        """The job's row under its documented names (:func:`echomq.rows.decode`: ``state`` filled in while
        queued, ``payload`` joined from its chunks); ``{}`` when there is none."""
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.job(job))  # type: ignore[assignment]
        return rows.decode(raw)

    def field(self, job: str, name: str) -> str | None:
        """One field of the job's row by its documented name (``state``, ``payload``, ...)."""
        value = self.row(job).get(name)
        return None if value is None else value.decode()

    def tombstone(self, job: str) -> rows.Tombstone | None:
        """The tombstone of a trimmed job in its shared hash (whether or not past its expiry), or None."""
        key, field = self.keys.tombstone(job)
        return rows.parse_tombstone(self.client.hget(key, field))  # type: ignore[arg-type]

    def tombstone_ttl(self, job: str) -> int:
        """The PTTL of the hash holding the tombstone of ``job`` (ms; -2 when there is none)."""
        return int(self.client.pttl(self.keys.tombstone(job)[0]))

    def lane(self, lane: str) -> list[str]:
        """The lane's queued ids in claim order."""
        return [m.decode() for m in self.client.zrange(self.keys.lane(lane), 0, -1)]

    def ring(self) -> list[str]:
        return [m.decode() for m in self.client.lrange(self.keys.ring, 0, -1)]

    def members(self, name: str) -> dict[str, float]:
        """The ids of ``active``/``delayed``/``done``/``dead`` with their scores."""
        key = getattr(self.keys, name)
        return {m.decode(): s for m, s in self.client.zrange(key, 0, -1, withscores=True)}

    def counters(self) -> dict[str, int]:
        raw: dict[bytes, bytes] = self.client.hgetall(self.keys.stats)  # type: ignore[assignment]
        return {k.decode(): int(v) for k, v in raw.items()}

    def wake_tokens(self) -> int:
        return int(self.client.llen(self.keys.wake))

    # -- nothing changed ------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Every key of the bus with its type and full value (and whether it has a TTL)."""
        out: Snapshot = {}
        for raw_key in sorted(self.client.scan_iter(match=self.keys.pattern, count=1000)):
            key = raw_key.decode()
            kind = self.client.type(raw_key).decode()
            value: Any
            if kind == "hash":
                value = dict(self.client.hgetall(raw_key))
            elif kind == "zset":
                value = self.client.zrange(raw_key, 0, -1, withscores=True)
            elif kind == "list":
                value = self.client.lrange(raw_key, 0, -1)
            elif kind == "string":
                value = self.client.get(raw_key)
            else:  # a type the bus never writes: compare its serialized form
                value = self.client.dump(raw_key)
            out[key] = (kind, (value, int(self.client.pttl(raw_key)) > 0))
        return out

    def assert_unchanged(self, before: Snapshot, **counter_deltas: int) -> None:
        """Assert no key changed since ``before``, except the named counters by the given deltas."""
        after = self.snapshot()
        stats = self.keys.stats
        assert {k: v for k, v in after.items() if k != stats} == {
            k: v for k, v in before.items() if k != stats
        }, "keys other than the counters changed"
        old = _counters(before.get(stats))
        new = _counters(after.get(stats))
        changed = {name: new.get(name, 0) - old.get(name, 0) for name in set(old) | set(new)}
        assert {k: v for k, v in changed.items() if v} == counter_deltas


def _counters(entry: tuple[str, Any] | None) -> dict[str, int]:
    if entry is None:
        return {}
    (value, _ttl) = entry[1]
    return {k.decode(): int(v) for k, v in value.items()}


def set_payload(client: redis.Redis, job_key: str, payload: bytes) -> None:
    """Replace the payload of the row at ``job_key`` (its 64-byte chunks, :mod:`echomq.rows`), as a
    foreign write would: for tests of what a worker does with a payload it cannot read."""
    chunks = [k for k in client.hkeys(job_key) if k.isdigit()]  # type: ignore[union-attr]
    if chunks:
        client.hdel(job_key, *chunks)
    parts = [payload[i : i + rows.CHUNK] for i in range(0, max(len(payload), 1), rows.CHUNK)]
    client.hset(job_key, mapping={str(i + 1): part for i, part in enumerate(parts)})
