"""Stale stream credentials against a real host (issue 12, adversary).

A player who logs out (or rotates a token they think stolen) expects that token to open nothing more.
A stream ticket is minted with the token and outlives it by up to ``ticket_ttl_s``: a thief who asked
for tickets with the stolen token could still follow the player's scored guesses after the logout. A
ticket is only good while the token that asked for it still names its player. Streams already open
when the token is revoked are another matter (see the xfail below).
"""

from __future__ import annotations

import httpx
import pytest

from tests.support.web import error_code, open_round


def _ticket(client, round_id: str) -> str:
    reply = client.post("/api/events/ticket", json={"round_id": round_id})
    assert reply.status_code == 201, reply.text
    return reply.json()["ticket"]


def _open(anon, ticket: str) -> int:
    with anon.stream("GET", f"/api/events?ticket={ticket}") as stream:
        if stream.status_code == 200:
            assert next(stream.iter_lines()) == "event: hello"
        else:
            stream.read()
            assert error_code(stream) == "invalid_ticket"
        return stream.status_code


def test_a_ticket_asked_for_before_a_logout_opens_no_stream(operator, join, anon):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    fresh, stale = _ticket(ada, round_id), _ticket(ada, round_id)
    assert _open(anon, fresh) == 200  # a ticket works (the test can fail)
    assert ada.delete("/api/me/token").status_code == 200
    assert _open(anon, stale) == 401


def test_a_ticket_asked_for_with_a_rotated_token_opens_no_stream(operator, join, anon):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    stale = _ticket(ada, round_id)
    rotated = ada.post("/api/me/token")
    assert rotated.status_code == 200
    ada.headers["authorization"] = f"Bearer {rotated.json()['token']}"
    assert _open(anon, stale) == 401
    assert _open(anon, _ticket(ada, round_id)) == 200  # the new token's tickets work


@pytest.mark.xfail(
    strict=True,
    reason="design: a revocation does not reach the hub, so streams opened before it keep streaming the "
    "player's scored guesses until the round closes or the client goes (SECURITY.md, Accounts)",
)
def test_a_logout_ends_the_streams_opened_with_the_token(served, operator, join, anon):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    with (
        httpx.Client(base_url=served.url, timeout=2) as reader,
        reader.stream("GET", f"/api/events?ticket={_ticket(ada, round_id)}") as stream,
    ):
        lines = stream.iter_lines()
        assert next(lines) == "event: hello"
        assert ada.delete("/api/me/token").status_code == 200
        rest = list(lines)  # the stream should end (it does not: the read times out after 2 s)
    assert "event: hello" not in rest
