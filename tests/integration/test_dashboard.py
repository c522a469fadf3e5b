"""The dashboard over real HTTP (uvicorn on a loopback port) on a real Redis: what the page and its JSON
show, the retry and delete actions and their effect in Redis, and every refusal (bad id, unknown job,
not dead, missing or stale token, another origin, another Host, read-only), each changing nothing."""

from __future__ import annotations

import asyncio
import re

import pytest

from echomq import PartitionedBus, ids
from echomq.testing.server import free_port
from tests.support.dashboard import ServedDashboard
from tests.support.probe import Probe

FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def serve(redis_server, tag):
    """Serve the dashboard of the test's bus with the given options (stopped at the end)."""
    started = []

    def start(**options):
        served = ServedDashboard(redis_server.url, tag, **options).start()
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def probe(sync_redis, bus):
    return Probe(sync_redis, bus.keys)


async def _dead(bus, lane="L", error="boom"):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane=lane, payload=b"p", max_attempts=1)
    [claim] = await bus.claim()
    await bus.fail(claim, error)
    return job


def _post(client, path, token, **headers):
    return client.post(path, content=f"csrf={token}", headers={**FORM, **headers}, follow_redirects=False)


async def test_the_board_shows_depths_lanes_leases_and_dead_letters(bus, serve):
    """The JSON and the page agree with what the test did: 3 queued on two lanes, one active lease with
    its owner and a deadline ahead on the server clock, one dead letter with its error."""
    dead = await _dead(bus, lane="D", error="the handler crashed")
    for lane in ("A", "A", "B", "C"):
        await bus.enqueue(ids.mint("JOB"), lane=lane, payload=b"")
    [claim] = await bus.claim(lease_ms=60_000, owner="worker-7")
    lanes = {"A": 2, "B": 1, "C": 1}
    lanes[claim.lane] -= 1
    served = serve()
    with served.client() as client:
        board = client.get("/api/board").json()
        page = client.get("/")
    assert board["depth"] == {"queued": 3, "delayed": 0, "active": 1, "done": 0, "dead": 1}
    assert {lane["lane"]: lane["depth"] for lane in board["lanes"]} == {k: v for k, v in lanes.items() if v}
    [lease] = board["leases"]
    assert (lease["job"], lease["lane"], lease["owner"]) == (claim.job, claim.lane, "worker-7")
    assert lease["deadline_ms"] == claim.deadline_ms
    assert 0 < lease["left_ms"] <= 60_000
    assert [(row["job"], row["error"]) for row in board["dead_letters"]] == [(dead, "the handler crashed")]
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert re.search(r'data-state="queued">3<', html)
    assert re.search(r'data-state="dead">1<', html)
    assert f'data-job="{dead}"' in html
    assert "the handler crashed" in html
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


async def test_throughput_is_measured_between_reads(bus, serve):
    """The first read has no rate yet; after jobs complete, a read a second later shows a positive
    completed rate, and the failed rate counts the failures."""
    served = serve()
    with served.client() as client:
        first = client.get("/api/board").json()["throughput"]
        assert first == {"admitted": None, "completed": None, "failed": None}
        for _ in range(4):
            await bus.enqueue(ids.mint("JOB"), lane="L", payload=b"")
            [claim] = await bus.claim()
            await bus.complete(claim)
        await _dead(bus)
        await asyncio.sleep(1.1)
        rates = client.get("/api/board").json()["throughput"]
    assert rates["completed"] > 0
    assert rates["admitted"] > rates["completed"]  # 5 admitted, 4 completed, over the same span
    assert rates["failed"] > 0


async def test_retry_and_delete_act_on_redis_and_say_so(bus, serve, probe):
    """Retry moves the dead job back to its lane; delete removes another (its tombstone stays); each
    answers 303 to the page, which says what was done."""
    retried, deleted = await _dead(bus, lane="R"), await _dead(bus, lane="S")
    served = serve()
    with served.client() as client:
        reply = _post(client, f"/dead/{retried}/retry", served.token)
        assert (reply.status_code, reply.headers["location"]) == (303, f"/?did=retried&job={retried}")
        assert f"{retried} is back in its lane." in client.get(reply.headers["location"]).text
        reply = _post(client, f"/dead/{deleted}/delete", served.token)
        assert (reply.status_code, reply.headers["location"]) == (303, f"/?did=deleted&job={deleted}")
        again = _post(client, f"/dead/{deleted}/delete", served.token)  # a resent form
        assert again.headers["location"] == f"/?did=already&job={deleted}"
    assert probe.lane("R") == [retried]
    assert probe.members("dead") == {}
    assert probe.row(deleted) == {}
    assert probe.tombstone(deleted) is not None
    assert probe.counters()["deleted"] == 1


async def test_bad_requests_are_refused_and_change_nothing(bus, serve, probe):
    """An ill-formed id (400), an unknown one (404), a job that is not dead (409), no token or a wrong
    one (403), another origin or a cross-site fetch (403), a non-form body (400), another Host (400):
    each refused, and no key of the bus changes."""
    dead = await _dead(bus)
    live = ids.mint("JOB")
    await bus.enqueue(live, lane="L", payload=b"")
    served = serve()
    before = probe.snapshot()
    token = served.token
    with served.client() as client:
        cases = [
            (_post(client, "/dead/JOB123/retry", token), 400),
            (_post(client, "/dead/not%20an%20id/delete", token), 400),
            (_post(client, f"/dead/{ids.mint('JOB')}/delete", token), 404),
            (_post(client, f"/dead/{live}/delete", token), 409),
            (_post(client, f"/dead/{live}/retry", token), 409),
            (_post(client, f"/dead/{dead}/delete", ""), 403),
            (_post(client, f"/dead/{dead}/delete", "x" * 43), 403),
            (_post(client, f"/dead/{dead}/delete", token, origin="http://evil.example"), 403),
            (_post(client, f"/dead/{dead}/retry", token, **{"sec-fetch-site": "cross-site"}), 403),
            (client.post(f"/dead/{dead}/delete", json={"csrf": token}), 400),
            (client.post(f"/dead/{dead}/delete", content="csrf=" + "a" * 5000, headers=FORM), 400),
            (_post(client, f"/dead/{dead}/delete", token, host="evil.example"), 400),
            (client.get(f"/dead/{dead}/delete"), 405),
        ]
        for reply, status in cases:
            assert reply.status_code == status, (reply.request.url, reply.text)
        assert "not dead (it is queued)" in _post(client, f"/dead/{live}/delete", token).text
        assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    probe.assert_unchanged(before)


async def test_the_message_of_a_link_names_only_a_well_formed_id(bus, serve):
    """A crafted ?did=...&job=... shows nothing unless both are what an action sends back."""
    served = serve()
    with served.client() as client:
        for query in ("did=pwned&job=JOB", "did=retried&job=<script>", "did=deleted&job=" + "J" * 26):
            html = client.get(f"/?{query}").text
            assert 'data-testid="message" role="status" aria-live="polite" hidden' in html, query
            assert "<script>" not in html.split("<body", 1)[1].replace('<script src="/static', "")


async def test_read_only_hides_the_buttons_and_refuses_the_actions(bus, serve, probe):
    """With read_only the page has no retry or delete button, and a post is refused with 403."""
    dead = await _dead(bus)
    served = serve(read_only=True)
    before = probe.snapshot()
    with served.client() as client:
        html = client.get("/").text
        assert f'data-job="{dead}"' in html
        assert 'data-testid="dead-retry"' not in html
        assert 'data-testid="dead-delete"' not in html
        assert _post(client, f"/dead/{dead}/retry", served.token).status_code == 403
        assert _post(client, f"/dead/{dead}/delete", served.token).status_code == 403
    probe.assert_unchanged(before)


async def test_a_partitioned_bus_shows_every_partition(redis_server, tag, serve):
    """On a partitioned bus the board sums the partitions and lists the dead letters of each."""
    async with PartitionedBus.from_url(redis_server.url, tag=tag, partitions=3) as pbus:
        dead = []
        for lane in ("a", "b", "c", "d"):
            job = ids.mint("JOB")
            await pbus.enqueue(job, lane=lane, payload=b"", max_attempts=1)
            [claim] = await pbus.claim()
            await pbus.fail(claim, "boom")
            dead.append(job)
        served = serve(partitions=3)
        with served.client() as client:
            board = client.get("/api/board").json()
            assert board["depth"]["dead"] == 4
            assert sorted(row["job"] for row in board["dead_letters"]) == sorted(dead)
            assert _post(client, f"/dead/{dead[2]}/delete", served.token).status_code == 303
        assert sorted(job for job, _ in await pbus.dead_jobs()) == sorted(dead[:2] + dead[3:])


async def test_redis_away_is_a_503_not_a_traceback(serve):
    """A dashboard whose Redis cannot be reached answers 503 with the reason, as HTML and as JSON."""
    served = ServedDashboard(f"redis://127.0.0.1:{free_port()}/0", "away").start()
    try:
        with served.client() as client:
            page = client.get("/")
            assert page.status_code == 503
            assert "Redis cannot be reached" in page.text
            assert client.get("/api/board").status_code == 503
    finally:
        served.stop()
