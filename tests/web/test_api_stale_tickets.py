"""Stale stream credentials against a real host (issue 12, adversary).

A player who logs out (or rotates a token they think stolen) expects that token to open nothing more.
A stream ticket is minted with the token and outlives it by up to ``ticket_ttl_s``: a thief who asked
for tickets with the stolen token could still follow the player's scored guesses after the logout. A
ticket is only good while the token that asked for it still names its player, and a stream it opened
ends (a last ``revoked`` event) at the hub's next check once the token no longer does.
"""

from __future__ import annotations

import dataclasses

import httpx
import pytest

from codemojex.web.admission import Limits
from tests.support.web import error_code, open_round


@pytest.fixture
def host_config(host_config):
    return dataclasses.replace(host_config, limits=Limits(stream_check_s=0.2))


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


def _ends_revoked(served, open_stream, revoke) -> list[str]:
    """The lines a stream sends after ``revoke()`` until it ends (a read timing out fails the test)."""
    with (
        httpx.Client(base_url=served.url, timeout=5) as reader,
        open_stream(reader) as stream,
    ):
        lines = stream.iter_lines()
        assert next(lines) == "event: hello"
        revoke()
        return list(lines)


def test_a_logout_ends_the_streams_opened_with_the_token(served, operator, join, anon):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    ticket = _ticket(ada, round_id)
    rest = _ends_revoked(
        served,
        lambda reader: reader.stream("GET", f"/api/events?ticket={ticket}"),
        lambda: ada.delete("/api/me/token").raise_for_status(),
    )
    assert "event: revoked" in rest


@pytest.mark.parametrize("opened_with", ["ticket", "header"])
def test_a_rotation_ends_the_streams_opened_with_the_old_token(served, operator, join, opened_with):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    if opened_with == "ticket":
        url, headers = f"/api/events?ticket={_ticket(ada, round_id)}", {}
    else:
        url, headers = f"/api/events?round_id={round_id}", {"authorization": ada.headers["authorization"]}

    def rotate() -> None:
        rotated = ada.post("/api/me/token")
        assert rotated.status_code == 200
        ada.headers["authorization"] = f"Bearer {rotated.json()['token']}"

    rest = _ends_revoked(served, lambda reader: reader.stream("GET", url, headers=headers), rotate)
    assert "event: revoked" in rest
    assert _open(ada, _ticket(ada, round_id)) == 200  # the new token opens streams


def test_a_stream_whose_token_still_works_is_not_ended(served, operator, join):
    round_id = open_round(operator)["round_id"]
    _, ada = join("Ada")
    _, bob = join("Bob")
    ticket = _ticket(ada, round_id)
    with pytest.raises(httpx.ReadTimeout):  # Bob's logout ends nothing of Ada's: her stream stays open
        _ends_revoked(
            served,
            lambda reader: reader.stream("GET", f"/api/events?ticket={ticket}"),
            lambda: bob.delete("/api/me/token").raise_for_status(),
        )
