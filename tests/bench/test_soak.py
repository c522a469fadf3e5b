"""The soak part: memory after enqueue-and-drain, less the tombstones it counts, is the memory before."""

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
    linear, per_tombstone, whole = figures(result)
    assert linear.reference == points[0]["used_memory"] / 1e6
    assert linear.value == result["cleared"] / 1e6
    # the tombstones hold memory: deleting their hashes frees some (a whole-server before/after comparison
    # at 400 jobs is within the noise of Redis's own buffers)
    assert result["cleared"] < points[-1]["used_memory"]
    assert per_tombstone.unit == "B"
    assert per_tombstone.value == (points[-1]["used_memory"] - result["cleared"]) / 400
    assert whole.value == 0
