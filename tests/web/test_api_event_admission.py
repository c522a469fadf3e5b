"""Event streams under admission control, over real HTTP and a real Redis: tickets instead of the token
in the URL, stream caps per player, per address and in all, closed rounds, and streams on many rounds
that do not hold a pooled Redis connection each."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator

import httpx

from codemojex.web.admission import Limits
from codemojex.web.subscribers import QUEUE_SIZE, Subscriber
from tests.support.web import error_code, open_round, wait_until

PROXIED = ("127.0.0.1",)


def limited(config, **limits):
    return dataclasses.replace(config, limits=Limits(**limits))


def ticket_of(client: httpx.Client, round_id: str, **headers: str) -> str:
    reply = client.post("/api/events/ticket", json={"round_id": round_id}, headers=headers)
    assert reply.status_code == 201, reply.text
    value: str = reply.json()["ticket"]
    return value


class Streams:
    """Event streams held open by the test (each on its own connection), closed at the end."""

    def __init__(self, served) -> None:
        self.client = httpx.Client(
            base_url=served.url, timeout=httpx.Timeout(10, read=30), limits=httpx.Limits(max_connections=200)
        )
        self.open: list[httpx.Response] = []
        self.lines: dict[int, Iterator[str]] = {}

    def start(self, path: str, **headers: str) -> httpx.Response:
        reply = self.client.send(self.client.build_request("GET", path, headers=headers), stream=True)
        if reply.status_code == 200:
            self.open.append(reply)
            lines = self.lines[id(reply)] = reply.iter_lines()
            assert next(lines) == "event: hello"
        else:
            reply.read()
            reply.close()
        return reply

    def events(self, reply: httpx.Response) -> Iterator[str]:
        for line in self.lines[id(reply)]:
            if line.startswith("event: "):
                yield line[len("event: ") :]

    def close(self) -> None:
        for reply in self.open:
            with contextlib.suppress(httpx.HTTPError):
                reply.close()
        self.client.close()


@contextlib.contextmanager
def streams(served) -> Iterator[Streams]:
    held = Streams(served)
    try:
        yield held
    finally:
        held.close()


def test_the_token_is_refused_in_the_url_and_a_ticket_opens_one_stream_once(served, operator, join):
    rid = open_round(operator)["round_id"]
    _, ada = join()
    token = ada.headers["authorization"].split()[1]
    with streams(served) as held:
        in_url = held.start(f"/api/events?round_id={rid}&token={token}")
        assert (in_url.status_code, error_code(in_url)) == (400, "token_in_url")
        ticket = ticket_of(ada, rid)
        assert held.start(f"/api/events?ticket={ticket}").status_code == 200
        again = held.start(f"/api/events?ticket={ticket}")
        assert (again.status_code, error_code(again)) == (401, "invalid_ticket")  # used once
        for bogus in ("x", "A" * 32, "../../etc"):
            reply = held.start(f"/api/events?ticket={bogus}")
            assert (reply.status_code, error_code(reply)) == (401, "invalid_ticket")


def test_a_ticket_is_short_lived_bound_to_its_round_and_stored_only_as_a_digest(
    served, operator, join, sync_redis, tag
):
    first = open_round(operator)["round_id"]
    second = open_round(operator)["round_id"]
    _, ada = join()
    anonymous = httpx.post(f"{served.url}/api/events/ticket", json={"round_id": first})
    assert anonymous.status_code == 401
    ticket = ticket_of(ada, first)
    keys = list(sync_redis.scan_iter(f"cmx:{{{tag}}}:ticket:*"))
    assert len(keys) == 1
    assert ticket not in keys[0].decode()
    assert 0 < sync_redis.ttl(keys[0]) <= Limits().ticket_ttl_s
    with streams(served) as held:
        other = held.start(f"/api/events?ticket={ticket}&round_id={second}")
        assert (other.status_code, error_code(other)) == (400, "ticket_mismatch")
        expiring = ticket_of(ada, first)
        for key in sync_redis.scan_iter(f"cmx:{{{tag}}}:ticket:*"):
            sync_redis.pexpire(key, 1)
        wait_until(
            lambda: not list(sync_redis.scan_iter(f"cmx:{{{tag}}}:ticket:*")), what="the ticket expired"
        )
        expired = held.start(f"/api/events?ticket={expiring}")
        assert (expired.status_code, error_code(expired)) == (401, "invalid_ticket")


def test_a_closed_round_gets_no_ticket_and_its_open_streams_end(served, operator, join):
    rid = open_round(operator)["round_id"]
    _, ada = join()
    with streams(served) as held:
        reply = held.start(f"/api/events?ticket={ticket_of(ada, rid)}")
        assert reply.status_code == 200
        assert operator.post(f"/api/operator/rounds/{rid}/close").status_code == 200
        assert "closed" in held.events(reply)  # then the stream ends (the loop ran out)
    refused = ada.post("/api/events/ticket", json={"round_id": rid})
    assert (refused.status_code, error_code(refused)) == (409, "round_closed")
    with ada.stream("GET", f"/api/events?round_id={rid}") as by_header:
        assert by_header.status_code == 409


def test_streams_are_capped_per_player_and_per_address(serve_app, host_config, join):
    config = limited(host_config, trusted_proxies=PROXIED, streams_per_player=2, streams_per_address=3)
    served = serve_app(config)
    with served.client("operator-token-of-the-tests") as operator:
        rid = open_round(operator)["round_id"]
    _, ada = join("Ada", on=served)
    _, bob = join("Bob", on=served)
    here, there = {"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-For": "198.51.100.2"}
    with streams(served) as held:
        for _ in range(2):
            assert held.start(f"/api/events?ticket={ticket_of(ada, rid)}", **here).status_code == 200
        third = held.start(f"/api/events?ticket={ticket_of(ada, rid)}", **there)
        assert (third.status_code, error_code(third)) == (429, "too_many_streams")  # the player's cap
        assert held.start(f"/api/events?ticket={ticket_of(bob, rid)}", **here).status_code == 200
        fourth = held.start(f"/api/events?ticket={ticket_of(bob, rid)}", **here)
        assert (fourth.status_code, error_code(fourth)) == (429, "too_many_streams")  # the address's
        assert held.start(f"/api/events?ticket={ticket_of(bob, rid)}", **there).status_code == 200
        held.open.pop(0).close()  # one of Ada's ends: she may open another

        def reopened() -> bool:
            reply = held.start(f"/api/events?ticket={ticket_of(ada, rid)}", **there)
            return reply.status_code == 200

        wait_until(reopened, what="a stream freed by a disconnect")


def test_streams_on_many_rounds_do_not_exhaust_the_pool(serve_app, host_config, join):
    config = limited(host_config, streams_per_player=100, streams_per_address=100)
    served = serve_app(dataclasses.replace(config, max_connections=8))
    with served.client("operator-token-of-the-tests") as operator:
        rounds = [open_round(operator)["round_id"] for _ in range(24)]
    _, ada = join("Ada", on=served)
    with streams(served) as held:
        for rid in rounds:  # three times the pool, each on a round of its own
            assert held.start(f"/api/events?ticket={ticket_of(ada, rid)}").status_code == 200
        for _ in range(20):
            assert ada.get("/api/rounds").status_code == 200
            assert ada.get("/api/wallet").status_code == 200


def test_a_subscriber_that_does_not_read_is_dropped_to_one_resync():
    async def scenario() -> list[object]:
        subscriber = Subscriber("RND0", "PLR0")
        for number in range(QUEUE_SIZE + 5):
            subscriber.offer(("leaderboard", {"n": number}))
        queued = []
        while not subscriber.queue.empty():
            queued.append(subscriber.queue.get_nowait())
        return queued

    late = [("leaderboard", {"n": n}) for n in range(QUEUE_SIZE + 1, QUEUE_SIZE + 5)]
    assert asyncio.run(scenario()) == [("resync", {"round_id": "RND0"}), *late]  # bounded, told to refetch


def test_open_streams_do_not_hold_request_slots(serve_app, host_config, join):
    served = serve_app(limited(host_config, inflight_per_address=2))
    with served.client("operator-token-of-the-tests") as operator:
        rid = open_round(operator)["round_id"]
    _, ada = join("Ada", on=served)
    with streams(served) as held:
        for _ in range(3):  # more streams than the address may have requests in flight
            assert held.start(f"/api/events?ticket={ticket_of(ada, rid)}").status_code == 200
        assert ada.get("/api/rounds").status_code == 200


def test_streams_are_capped_in_all(serve_app, host_config, join):
    served = serve_app(limited(host_config, trusted_proxies=PROXIED, streams_total=2))
    with served.client("operator-token-of-the-tests") as operator:
        rid = open_round(operator)["round_id"]
    players = [join(name, on=served)[1] for name in ("Ada", "Bob", "Cy")]
    with streams(served) as held:
        for number, player in enumerate(players[:2]):
            path = f"/api/events?ticket={ticket_of(player, rid)}"
            assert held.start(path, **{"X-Forwarded-For": f"203.0.113.{number}"}).status_code == 200
        third = held.start(
            f"/api/events?ticket={ticket_of(players[2], rid)}", **{"X-Forwarded-For": "198.51.100.9"}
        )
        assert (third.status_code, error_code(third)) == (429, "too_many_streams")
        assert "host" in third.json()["error"]["message"]
