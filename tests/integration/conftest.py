"""Fixtures shared by the script tests."""

from __future__ import annotations

import pytest

from tests.support.probe import Probe


@pytest.fixture
def probe(sync_redis, bus):
    """A view of the test bus's keys (empty at the start); the bus checks both invariants after every
    script it runs."""
    view = Probe(sync_redis, bus.keys)
    assert view.check() == {}
    view.watch(bus)
    return view
