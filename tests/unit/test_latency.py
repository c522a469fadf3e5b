"""The latency histogram's buckets are the same in score.lua (which counts) and codemojex.latency (which
reads them for /metrics)."""

from __future__ import annotations

import re
from importlib import resources

from codemojex.latency import BUCKETS_MS


def test_score_lua_counts_into_the_buckets_the_metrics_read():
    source = (resources.files("codemojex") / "lua" / "score.lua").read_text()
    found = re.search(r"local BUCKETS = \{([^}]*)\}", source)
    assert found, "score.lua declares its BUCKETS"
    assert tuple(int(bound) for bound in found.group(1).split(",")) == BUCKETS_MS


def test_the_buckets_ascend():
    assert list(BUCKETS_MS) == sorted(set(BUCKETS_MS))
