"""The queue's structural invariants, checked against the real Redis state of one bus.

1. Every job row is in exactly one location, and that location matches its ``state``
   (a trimmed tombstone is in none).
2. A lane is in the ring iff it holds a job, and it is in the ring once; the ``waiting`` hash (the
   fairness lag's clock) has a field for exactly the lanes in the ring.
3. Every id in a location has a row.
"""

from __future__ import annotations

from collections import Counter

import redis

from echomq.keyspace import Keyspace

_STATE_OF_SET = {"active": "active", "delayed": "delayed", "done": "done", "dead": "dead"}


def locations(client: redis.Redis, keys: Keyspace) -> dict[str, list[str]]:
    """job id -> every location key that holds it."""
    where: dict[str, list[str]] = {}
    for name in ("active", "delayed", "done", "dead"):
        key = getattr(keys, name)
        for member in client.zrange(key, 0, -1):
            where.setdefault(member.decode(), []).append(name)
    for key in client.scan_iter(match=f"{keys.prefix}lane:*", count=1000):
        lane = key.decode()[len(keys.prefix) + len("lane:") :]
        for member in client.zrange(key, 0, -1):
            where.setdefault(member.decode(), []).append(f"lane:{lane}")
    return where


def rows(client: redis.Redis, keys: Keyspace) -> dict[str, dict[str, str]]:
    """job id -> its row (payload and result left out)."""
    out = {}
    for key in client.scan_iter(match=f"{keys.prefix}job:*", count=1000):
        row = client.hgetall(key)
        job = key.decode()[len(keys.prefix) + len("job:") :]
        out[job] = {
            k.decode(): v.decode("utf-8", "replace")
            for k, v in row.items()
            if k not in (b"payload", b"result")
        }
    return out


def check(client: redis.Redis, keys: Keyspace) -> dict[str, str]:
    """Assert the invariants; return job id -> state for further checks."""
    where = locations(client, keys)
    table = rows(client, keys)
    for job, places in where.items():
        assert len(places) == 1, f"{job} is in {places}"
        assert job in table, f"{job} is in {places[0]} but has no row"
    states = {}
    for job, row in table.items():
        state = row["state"]
        states[job] = state
        if "trimmed" in row:
            assert job not in where, f"trimmed {job} is still in {where[job]}"
            continue
        assert job in where, f"{job} ({state}) is in no location"
        place = where[job][0]
        expected = f"lane:{row['lane']}" if state == "queued" else _STATE_OF_SET[state]
        assert place == expected, f"{job} has state {state} but is in {place}"
    ring = [lane.decode() for lane in client.lrange(keys.ring, 0, -1)]
    counts = Counter(ring)
    assert all(n == 1 for n in counts.values()), f"a lane is in the ring more than once: {counts}"
    non_empty = {place[5:] for places in where.values() for place in places if place.startswith("lane:")}
    assert set(ring) == non_empty, f"ring {sorted(ring)} != non-empty lanes {sorted(non_empty)}"
    waiting = {lane.decode() for lane in client.hkeys(keys.waiting)}
    assert waiting == set(ring), f"waiting {sorted(waiting)} != ring {sorted(ring)}"
    return states
