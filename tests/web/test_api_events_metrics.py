"""Live events (server-sent events) and the Prometheus metrics, over real HTTP with a real worker process."""

from __future__ import annotations

import json
import queue
import threading

import httpx
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from tests.support.web import error_code, open_round, secret_of, wait_until


class EventReader:
    """Reads one event stream in a thread; ``next(kind)`` returns the next event of that kind."""

    def __init__(self, url: str) -> None:
        self.events: queue.Queue[tuple[str, dict]] = queue.Queue()
        self.client = httpx.Client(timeout=httpx.Timeout(10, read=30))
        self.response = self.client.send(self.client.build_request("GET", url), stream=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        kind = None
        try:
            for line in self.response.iter_lines():
                if line.startswith("event: "):
                    kind = line[len("event: ") :]
                elif line.startswith("data: ") and kind is not None:
                    self.events.put((kind, json.loads(line[len("data: ") :])))
                    kind = None
        except (httpx.HTTPError, RuntimeError):
            pass  # closed by the test

    def next(self, kind: str, timeout: float = 20) -> dict:
        while True:
            got, data = self.events.get(timeout=timeout)
            if got == kind:
                return data

    def close(self) -> None:
        self.response.close()
        self.client.close()
        self.thread.join(10)


def test_the_stream_says_hello_then_my_scored_guess_and_the_board(
    served, operator, join, score_worker, sync_redis, tag
):
    the_round = open_round(operator)
    rid = the_round["round_id"]
    ada_id, ada = join("Ada")
    _, bob = join("Bob")
    ticket = ada.post("/api/events/ticket", json={"round_id": rid}).json()["ticket"]
    reader = EventReader(f"{served.url}/api/events?ticket={ticket}")
    try:
        assert reader.next("hello") == {"round_id": rid, "player_id": ada_id}
        assert reader.response.headers["content-type"].startswith("text/event-stream")
        bob.post(f"/api/rounds/{rid}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
        board = reader.next("leaderboard")
        assert [entry["name"] for entry in board["entries"]] == ["Bob"]  # Bob's guess: no "scored" for Ada
        assert reader.events.empty()
        secret = secret_of(sync_redis, tag, rid)
        job = ada.post(f"/api/rounds/{rid}/guesses", json={"guess": secret}).json()["job_id"]
        scored = reader.next("scored")
        assert scored == {
            "round_id": rid,
            "job_id": job,
            "guess_id": "GES" + job[3:],
            "code": "HHHHHH",
            "solved": True,
        }
        board = reader.next("leaderboard")
        assert [(e["name"], e["solved"]) for e in board["entries"]] == [("Ada", True), ("Bob", False)]
    finally:
        reader.close()


def test_the_stream_takes_the_header_token_and_refuses_a_bad_round(served, operator, join):
    the_round = open_round(operator)
    _, ada = join()
    with ada.stream("GET", f"/api/events?round_id={the_round['round_id']}") as reply:
        assert reply.status_code == 200
        first = next(reply.iter_lines())
        assert first == "event: hello"
    unknown = ada.get("/api/events?round_id=RND00000000000000000000000")
    assert (unknown.status_code, error_code(unknown)) == (404, "unknown_round")
    assert ada.get("/api/events").status_code == 422


def _metrics(client) -> dict[str, float]:
    reply = client.get("/metrics")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == CONTENT_TYPE_LATEST  # the text format prometheus_client writes
    samples = {}
    for family in text_string_to_metric_families(reply.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def test_metrics_report_the_queue_and_the_latency_histogram(served, operator, anon, join, score_worker, tag):
    the_round = open_round(operator)
    _, ada = join()
    path = f"/api/rounds/{the_round['round_id']}/guesses"
    for number in range(3):
        ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": f"k{number}"})
    ada.post(path, json={"guess": "🍎🍌🍇🍒🥝🍑"}, headers={"Idempotency-Key": "k0"})  # a duplicate
    wait_until(lambda: _metrics(anon).get("codemojex_guesses_scored_total") == 3, what="three scored guesses")
    found = _metrics(anon)
    assert found[f"echomq_jobs_total{{bus={tag},event=admitted}}"] == 3
    assert found[f"echomq_jobs_total{{bus={tag},event=duplicate}}"] == 1
    assert found[f"echomq_jobs_total{{bus={tag},event=claimed}}"] == 3
    assert found[f"echomq_jobs_total{{bus={tag},event=completed}}"] == 3
    assert found[f"echomq_jobs_total{{bus={tag},event=stale}}"] == 0
    assert found[f"echomq_jobs_total{{bus={tag},event=reclaimed}}"] == 0
    assert found[f"echomq_jobs_total{{bus={tag},event=dead}}"] == 0
    assert found[f"echomq_jobs{{bus={tag},state=done}}"] == 3
    assert found[f"echomq_jobs{{bus={tag},state=queued}}"] == 0
    assert found[f"echomq_lanes_waiting{{bus={tag}}}"] == 0
    assert f"echomq_fairness_lag_max{{bus={tag}}}" in found
    assert found["codemojex_submit_to_scored_seconds_count"] == 3
    assert found["codemojex_submit_to_scored_seconds_bucket{le=+Inf}"] == 3
    buckets = sorted(
        (float(key.split("le=")[1].rstrip("}")), value)
        for key, value in found.items()
        if key.startswith("codemojex_submit_to_scored_seconds_bucket") and "+Inf" not in key
    )
    assert [count for _, count in buckets] == sorted(count for _, count in buckets)  # cumulative
    assert buckets[-1][1] <= 3
    assert found["codemojex_submit_to_scored_seconds_sum"] >= 0
    assert found["codemojex_players"] == 1


def test_metrics_show_lane_depth_without_naming_any_player(served, operator, anon, join, tag):
    the_round = open_round(operator)
    ada_id, ada = join("Ada")
    bob_id, bob = join("Bob")
    ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    for _ in range(2):
        bob.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"})
    found = _metrics(anon)
    assert found[f"echomq_lane_depth_max{{bus={tag}}}"] == 2  # Bob's lane
    text = anon.get("/metrics").text
    assert ada_id not in text
    assert bob_id not in text  # a lane is a player id: the public scrape names none
    assert "lane=" not in text
    assert found[f"echomq_lanes_waiting{{bus={tag}}}"] == 2
    assert found[f"echomq_jobs{{bus={tag},state=queued}}"] == 3
