"""Fault schedules parse strictly: a typo must not silently test nothing; unset, nothing fires."""

from __future__ import annotations

import pytest

from echomq.worker import faults


def test_points_with_and_without_probabilities_parse():
    armed = faults.parse("worker.after_claim@0.25, worker.before_ack", faults.POINTS)
    assert armed.points == {"worker.after_claim": 0.25, "worker.before_ack": 1.0}


@pytest.mark.parametrize(
    "text", ["worker.after_clam", "worker.before_ack@2", "worker.before_ack@-0.1", "x@y"]
)
def test_a_bad_schedule_is_an_error(text):
    with pytest.raises(ValueError, match="fault"):
        faults.parse(text, faults.POINTS)


def test_unset_nothing_fires_and_an_unknown_point_is_a_bug(monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    assert not faults.WORKER.fires("worker.after_claim")
    with pytest.raises(KeyError):
        faults.WORKER.fires("worker.no_such_point")


def test_a_probability_fires_about_that_often_with_a_seed(monkeypatch):
    monkeypatch.setenv(faults.ENV, "worker.before_ack@0.3")
    monkeypatch.setenv(faults.SEED_ENV, "7")
    points = faults.Faults(faults.ENV, faults.POINTS)
    fired = sum(points.fires("worker.before_ack") for _ in range(2000))
    assert 450 < fired < 750  # 600 expected; the seed makes it the same every run
    assert not points.fires("worker.after_claim")  # not listed


def test_the_same_seed_draws_the_same_schedule(monkeypatch):
    monkeypatch.setenv(faults.ENV, "worker.before_ack@0.5")
    monkeypatch.setenv(faults.SEED_ENV, "42")
    one, two = faults.Faults(faults.ENV, faults.POINTS), faults.Faults(faults.ENV, faults.POINTS)
    assert [one.fires("worker.before_ack") for _ in range(64)] == [
        two.fires("worker.before_ack") for _ in range(64)
    ]
