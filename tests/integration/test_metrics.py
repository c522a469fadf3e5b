"""The Prometheus exporter over real HTTP on a real Redis: ``echomq metrics`` as a process scraped by
httpx and read by prometheus_client's own parser, its counts what the test did; several buses, a bus
that cannot be read, lane labels only when asked."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from echomq import Bus, SyncBus, ids, metrics
from echomq.testing.server import free_port
from tests.support.workers import ROOT


def scrape(url: str) -> dict[str, float]:
    """``name{label=value,...}`` -> value of every sample at ``url``, labels sorted."""
    reply = httpx.get(url, timeout=10)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


async def _traffic(bus: Bus, *, done: int, dead: int, queued: int) -> None:
    for _ in range(done):
        await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"")
        [claim] = await bus.claim()
        await bus.complete(claim)
    for _ in range(dead):
        await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"", max_attempts=1)
        [claim] = await bus.claim()
        await bus.fail(claim, "boom")
    for i in range(queued):
        await bus.enqueue(ids.mint("JOB"), lane=f"Q{i % 2}", payload=b"")


@pytest.fixture
def exporter(redis_server):
    """Start ``echomq metrics`` with the given arguments; returns its /metrics URL (stopped at the end)."""
    started = []

    def start(*args):
        port = free_port()
        env = dict(os.environ, REDIS_URL=redis_server.url)
        proc = subprocess.Popen(
            [sys.executable, "-m", "echomq.cli", "metrics", "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        line = proc.stdout.readline()
        assert line.strip() == f"serving http://127.0.0.1:{port}/metrics", proc.stderr.read()
        return f"http://127.0.0.1:{port}/metrics"

    yield start
    for proc in started:
        proc.terminate()
        _, err = proc.communicate(timeout=15)  # closes its pipes
        assert proc.returncode == 0, err


async def test_the_exporter_reports_what_happened_on_each_bus(redis_server, tag, exporter):
    """Two buses, each with its own traffic: every counter and depth of each matches, under its label."""
    other = f"{tag}-b"
    async with (
        Bus.from_url(redis_server.url, tag=tag) as one,
        Bus.from_url(redis_server.url, tag=other) as two,
    ):
        await _traffic(one, done=3, dead=1, queued=2)
        await _traffic(two, done=1, dead=2, queued=0)
        await one.enqueue(ids.mint("JOB"), lane="Q0", payload=b"", delay_ms=60_000)
        found = scrape(exporter("--bus", tag, "--bus", other))
    for bus, done, dead, queued, admitted in ((tag, 3, 1, 2, 7), (other, 1, 2, 0, 3)):
        assert found[f"echomq_up{{bus={bus}}}"] == 1
        assert found[f"echomq_jobs_total{{bus={bus},event=admitted}}"] == admitted
        assert found[f"echomq_jobs_total{{bus={bus},event=completed}}"] == done
        assert found[f"echomq_jobs_total{{bus={bus},event=dead}}"] == dead
        assert found[f"echomq_jobs_total{{bus={bus},event=deleted}}"] == 0
        assert found[f"echomq_jobs{{bus={bus},state=done}}"] == done
        assert found[f"echomq_jobs{{bus={bus},state=dead}}"] == dead
        assert found[f"echomq_jobs{{bus={bus},state=queued}}"] == queued
    assert found[f"echomq_jobs{{bus={tag},state=delayed}}"] == 1
    assert found[f"echomq_lanes_waiting{{bus={tag}}}"] == 2
    assert found[f"echomq_lane_depth_max{{bus={tag}}}"] == 1
    assert not any("lane=" in key for key in found)  # no lane is named unless asked


async def test_each_scrape_reads_afresh_and_lane_labels_are_opt_in(redis_server, bus, exporter):
    """A second scrape sees jobs enqueued after the first; with --lane-labels each lane read is named."""
    url = exporter("--bus", bus.tag, "--lane-labels")
    assert scrape(url)[f"echomq_jobs{{bus={bus.tag},state=queued}}"] == 0
    await _traffic(bus, done=0, dead=0, queued=3)
    found = scrape(url)
    assert found[f"echomq_jobs{{bus={bus.tag},state=queued}}"] == 3
    assert found[f"echomq_lane_depth{{bus={bus.tag},lane=Q0}}"] == 2
    assert found[f"echomq_lane_depth{{bus={bus.tag},lane=Q1}}"] == 1
    assert f"echomq_lane_lag{{bus={bus.tag},lane=Q0}}" in found


async def test_a_partitioned_bus_is_reported_merged(redis_server, tag, exporter):
    """With --partitions the exporter sums the partitions of the bus under its one tag."""
    from echomq import PartitionedBus  # noqa: PLC0415

    async with PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3) as pbus:
        for lane in ("a", "b", "c", "d", "e"):
            await pbus.enqueue(ids.mint("JOB"), lane=lane, payload=b"")
    found = scrape(exporter("--tag", tag, "--partitions", "3"))
    assert found[f"echomq_jobs{{bus={tag},state=queued}}"] == 5
    assert found[f"echomq_lanes_waiting{{bus={tag}}}"] == 5


def test_a_bus_that_cannot_be_read_is_down_and_the_others_still_report(redis_server, tag):
    """A collector over a reachable bus and one whose Redis is gone: up 1 and its figures for the first,
    up 0 and nothing else for the second; the scrape answers."""
    gone = SyncBus.from_url(f"redis://127.0.0.1:{free_port()}/0", tag="gone")
    with SyncBus.from_url(redis_server.url, tag=tag) as here, gone:
        collector = metrics.StatsCollector(
            {tag: metrics.sync_reader(here), "gone": metrics.sync_reader(gone)}
        )
        server = metrics.serve(collector, port=0)
        try:
            found = scrape(f"http://127.0.0.1:{server.server_port}/metrics")
        finally:
            server.shutdown()
            server.server_close()
    assert found[f"echomq_up{{bus={tag}}}"] == 1
    assert found["echomq_up{bus=gone}"] == 0
    assert f"echomq_jobs{{bus={tag},state=queued}}" in found
    assert not any("bus=gone" in key and not key.startswith("echomq_up") for key in found)


def test_bad_options_exit_2_before_anything_is_served(redis_server):
    """A port out of range or a bad tag: exit 2, one line, no traceback."""
    for args in (["--port", "70000"], ["--port", "1", "--bus", "bad tag!"], ["--port", "x"]):
        out = subprocess.run(
            [sys.executable, "-m", "echomq.cli", "metrics", *args],
            cwd=ROOT,
            env=dict(os.environ, REDIS_URL=redis_server.url),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_families_answer_without_reading_redis():
    """families() of samples read elsewhere (an asyncio app's): the same metrics, no I/O."""
    from echomq.stats import Stats  # noqa: PLC0415

    stats = Stats(counters={"admitted": 4}, queued=1, delayed=0, active=0, done=3, dead=0, lanes_total=1)
    text, kind = metrics.latest([metrics.BusSample("x", stats)])
    assert kind.startswith("text/plain")
    assert b'echomq_jobs_total{bus="x",event="admitted"} 4.0' in text
