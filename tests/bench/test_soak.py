"""The soak part: memory after enqueue-and-drain is the memory before plus the tombstones it counts."""

from __future__ import annotations

import pytest
from bench.soak import figures, soak


@pytest.mark.slow
def test_every_finished_job_is_trimmed_to_a_tombstone_at_each_checkpoint() -> None:
    """A real worker drains two chunks: each checkpoint counts one tombstone per job, no whole row left."""
    result = soak(400, chunks=2)
    points = result["checkpoints"]
    assert [p["finished"] for p in points] == [1, 201, 401]
    assert [p["rows"] for p in points] == [1, 201, 401]
    assert all(p["whole"] == 0 for p in points)
    assert points[-1]["used_memory"] > points[0]["used_memory"]
    linear, per_tombstone = figures(result)
    assert linear.reference is not None
    assert per_tombstone.unit == "B"
    assert per_tombstone.value == (points[-1]["used_memory"] - points[0]["used_memory"]) / 400
