"""The Play page's account handling in a real browser: "Log out" revokes the token on the server; an
ended token (expired, revoked elsewhere) sends the player back to the join form with their name filled
in; a taken name fills in the free name the server suggests; an old token is rotated on start; a
logout elsewhere ends the page's event stream, and the page goes back to the join form without a reload."""

from __future__ import annotations

import dataclasses

import pytest
from playwright.sync_api import expect

from codemojex.web.admission import Limits
from tests.browser.test_play import join_as, player_token
from tests.support.web import open_round

pytestmark = pytest.mark.browser


@pytest.fixture
def host_config(host_config):
    return dataclasses.replace(host_config, limits=Limits(stream_check_s=0.5))  # revocations seen soon


def test_log_out_revokes_the_token_on_the_server(served, page):
    join_as(page, "Ada")
    token = player_token(page)
    page.get_by_test_id("leave").click()
    page.get_by_test_id("signout-confirm").click()  # past the warning (tests/browser/test_recovery.py)
    expect(page.get_by_test_id("join-form"), "logged out: the join form again").to_be_visible()
    expect(page.get_by_test_id("message")).to_contain_text("Logged out")
    assert page.evaluate("() => localStorage.getItem('cmx.token')") is None
    with served.client(token) as ada:
        assert ada.get("/api/me").status_code == 401, "the token no longer works anywhere"


def test_a_logout_elsewhere_ends_the_stream_and_shows_the_join_form(served, operator, page):
    open_round(operator)
    join_as(page, "Ada")
    expect(page.get_by_test_id("live"), "the page follows the round's events").to_have_attribute(
        "data-live", "live"
    )
    asked: list[str] = []
    page.on("request", lambda sent: asked.append(sent.url))
    with served.client(player_token(page)) as ada:
        assert ada.delete("/api/me/token").status_code == 200  # a logout in another tab or device
    expect(page.get_by_test_id("join-form"), "the stream's 'revoked': the join form again").to_be_visible()
    expect(page.get_by_test_id("name")).to_have_value("Ada")
    assert not [url for url in asked if "/api/events/ticket" in url], "no ticket asked with a dead token"


def test_an_ended_token_offers_to_join_again_with_the_name_filled_in(served, page):
    join_as(page, "Ada")
    with served.client(player_token(page)) as ada:
        assert ada.delete("/api/me/token").status_code == 200  # ended elsewhere (as if it expired)
    page.reload()
    expect(page.get_by_test_id("join-form"), "an ended token: the join form again").to_be_visible()
    expect(page.get_by_test_id("message")).to_contain_text("join again")
    expect(page.get_by_test_id("name")).to_have_value("Ada")
    assert page.evaluate("() => localStorage.getItem('cmx.token')") is None


def test_a_taken_name_fills_in_the_suggested_free_name(served, anon, page):
    assert anon.post("/api/players", json={"name": "Bob"}).status_code == 201
    page.goto("/")
    page.get_by_test_id("name").fill("B0B")
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("message"), "the server's own refusal").to_contain_text(
        "Another player is called 'B0B' or a name that looks the same"
    )
    suggestion = page.get_by_test_id("name").input_value()
    assert suggestion.startswith("B0B ")
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("player-name")).to_have_text(suggestion)


def test_a_token_past_half_its_life_is_rotated_on_start(served, page):
    join_as(page, "Ada")
    old = player_token(page)
    page.evaluate("() => localStorage.setItem('cmx.token_expires_ms', String(Date.now() + 1000))")
    page.reload()
    expect(page.get_by_test_id("player-name")).to_have_text("Ada")
    page.wait_for_function("old => localStorage.getItem('cmx.token') !== old", arg=old)
    with served.client(old) as stale:
        assert stale.get("/api/me").status_code == 401
    with served.client(player_token(page)) as renewed:
        assert renewed.get("/api/me").status_code == 200
