"""The queue's structural invariants, read from the real Redis state of one bus (the conformance suite
and the tests check them; nothing here changes a key).

1. Every job row is in exactly one location, and that location matches its ``state`` (a trimmed
   tombstone is in none); every id in a location has a row.
2. A lane is in the ring iff it holds a job, and it is in the ring once; the ``waiting`` hash (the
   fairness lag's clock) has a field for exactly the lanes in the ring.
3. (:func:`gate_state`, flow control on one node) A held lane that holds jobs is held by a gate that is
   still closed (paused, at its cap, or throttled): otherwise nothing would ever put it back in the ring;
   every throttled lane is held; an active row is marked ``K`` iff its lane has a cap now.

:func:`queue_structure` returns what is broken (empty when all holds), so a report can list it all.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from echomq.keyspace import Keyspace
from echomq.rows import decode as decode_row
from echomq.rows import parse_tombstone

# A blocking redis.Redis (decode_responses=False): its stubs type replies too loosely to index.
Client = Any

_SETS = ("active", "delayed", "done", "dead")


def locations(client: Client, keys: Keyspace) -> dict[str, list[str]]:
    """job id -> every location key that holds it (``active``, ``lane:<lane>``, ...)."""
    where: dict[str, list[str]] = {}
    for name in _SETS:
        for member in client.zrange(getattr(keys, name), 0, -1):
            where.setdefault(member.decode(), []).append(name)
    for key in client.scan_iter(match=f"{keys.prefix}lane:*", count=1000):
        lane = key.decode()[len(keys.prefix) + len("lane:") :]
        for member in client.zrange(key, 0, -1):
            where.setdefault(member.decode(), []).append(f"lane:{lane}")
    return where


def job_rows(client: Client, keys: Keyspace) -> dict[str, dict[str, str]]:
    """job id -> its row under its documented names (:func:`echomq.rows.decode`; payload, result and
    digest left out), and for a trimmed job whose tombstone still counts, what the tombstone keeps
    (state, attempts, ``trimmed``, ``expires``)."""
    out = {}
    for key in client.scan_iter(match=f"{keys.prefix}job:*", count=1000):
        row = decode_row(client.hgetall(key))
        out[key.decode()[len(keys.prefix) + len("job:") :]] = {
            k: v.decode("utf-8", "replace")
            for k, v in row.items()
            if k not in ("payload", "result", "digest")
        }
    seconds, micros = client.time()
    now = int(seconds) * 1000 + int(micros) // 1000
    for key in client.scan_iter(match=f"{keys.prefix}tomb:*", count=1000):
        for field, value in client.hgetall(key).items():
            tomb = parse_tombstone(value)
            if tomb is not None and tomb.expires_ms > now:  # one past its expiry counts as none
                out[keys.tombstone_job(key, field)] = {
                    "state": tomb.state.decode(),
                    "attempts": str(tomb.attempts),
                    "trimmed": "1",
                    "expires": str(tomb.expires_ms),
                }
    return out


def queue_structure(client: Client, keys: Keyspace, rows: dict[str, dict[str, str]]) -> list[str]:
    """What breaks invariants 1 and 2, given the bus's ``rows`` (:func:`job_rows`)."""
    problems = []
    where = locations(client, keys)
    for job, places in where.items():
        if len(places) != 1:
            problems.append(f"{job} is in {len(places)} locations: {places}")
        if job not in rows:
            problems.append(f"{job} is in {places[0]} but has no row")
    for job, row in rows.items():
        if "trimmed" in row:
            if job in where:
                problems.append(f"trimmed {job} is still in {where[job]}")
            continue
        expected = f"lane:{row['lane']}" if row["state"] == "queued" else row["state"]
        if where.get(job, [None])[0] != expected:
            problems.append(f"{job} has state {row['state']} but is in {where.get(job)}")
    ring = [lane.decode() for lane in client.lrange(keys.ring, 0, -1)]
    twice = [lane for lane, count in Counter(ring).items() if count > 1]
    if twice:
        problems.append(f"lanes in the ring more than once: {twice}")
    lanes = {place[5:] for places in where.values() for place in places if place.startswith("lane:")}
    held = {lane.decode() for lane in client.smembers(keys.held)}
    if set(ring) != lanes - held:
        problems.append(
            f"the ring {sorted(ring)} is not the non-empty lanes {sorted(lanes)} less the held {sorted(held)}"
        )
    problems.extend(_capped_counts(client, keys, rows))
    waiting = {lane.decode() for lane in client.hkeys(keys.waiting)}
    if waiting != set(ring):
        problems.append(f"the fairness clock's lanes {sorted(waiting)} are not the ring's {sorted(ring)}")
    return problems


def _capped_counts(client: Client, keys: Keyspace, rows: dict[str, dict[str, str]]) -> list[str]:
    """What breaks the caps' count: ``lane-active`` holds, per lane, the active rows marked ``K``."""
    marked: Counter[str] = Counter()
    for job in client.zrange(keys.active, 0, -1):
        if client.hget(keys.job(job.decode()), "K") is not None:
            marked[rows[job.decode()]["lane"]] += 1
    raw = client.hgetall(keys.lane_active)
    counted = {lane.decode(): int(n) for lane, n in raw.items()}
    if counted != dict(marked):
        return [f"lane-active {counted} is not the active rows marked K per lane {dict(marked)}"]
    return []


def _lane_closed(client: Client, keys: Keyspace, lane: str) -> bool:
    paused, own_cap, any_cap, own_rate, any_rate = client.hmget(
        keys.flow, f"paused:{lane}", f"cap:{lane}", "cap:*", f"rate:{lane}", "rate:*"
    )
    cap = own_cap or any_cap
    if paused is not None or (cap is not None and int(client.hget(keys.lane_active, lane) or 0) >= int(cap)):
        return True
    return (own_rate or any_rate) is not None and client.zscore(keys.throttled, lane) is not None


def gate_state(client: Client, keys: Keyspace) -> list[str]:
    """What breaks invariant 3 (flow control's held lanes, throttled lanes and cap marks); not checked
    while the bus's slot is being resharded (a gate's key may then be on the other node)."""
    held = {lane.decode() for lane in client.smembers(keys.held)}
    problems = [
        f"lane {lane} is held with queued jobs, but no gate of it is closed"
        for lane in sorted(held)
        if client.zcard(f"{keys.prefix}lane:{lane}") > 0 and not _lane_closed(client, keys, lane)
    ]
    throttled = {lane.decode() for lane in client.zrange(keys.throttled, 0, -1)}
    if not throttled <= held:
        problems.append(f"throttled lanes {sorted(throttled - held)} are not held")
    settings = {name.decode() for name in client.hkeys(keys.flow)}
    for job in client.zrange(keys.active, 0, -1):
        lane, mark = client.hmget(keys.job(job.decode()), "l", "K")
        capped = f"cap:{lane.decode()}" in settings or "cap:*" in settings
        if capped != (mark is not None):
            problems.append(f"active {job.decode()} of lane {lane.decode()}: capped {capped}, marked {mark}")
    return problems
