"""The queue's structural invariants as assertions, for the tests (:mod:`echomq.testing.invariants`
reads them).

1. Every job row is in exactly one location, and that location matches its ``state``
   (a trimmed tombstone is in none).
2. A lane is in the ring iff it holds a job and no flow gate holds it (``held``), and it is in the ring
   once; the ``waiting`` hash (the fairness lag's clock) has a field for exactly the lanes in the ring.
3. Every id in a location has a row.
"""

from __future__ import annotations

import redis

from echomq.keyspace import Keyspace
from echomq.testing.invariants import job_rows, locations, queue_structure

__all__ = ["check", "locations", "rows"]

rows = job_rows


def check(client: redis.Redis, keys: Keyspace) -> dict[str, str]:
    """Assert the invariants; return job id -> state for further checks."""
    table = job_rows(client, keys)
    problems = queue_structure(client, keys, table)
    assert not problems, problems
    return {job: row["state"] for job, row in table.items()}
