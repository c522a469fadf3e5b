"""Accounts that last, in a real browser: the recovery code shown after joining signs the player in on a
second browser context (the first keeps playing); "Log out" warns first and can show a new code; the
server's refusal of a name is shown as the server words it, and the name field takes 32 code points
(not 16 astral characters); the help line names the real number of keys; no 404 is asked for while no
round is open; and the indicator says the server is unreachable when it is down."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import CONSOLE, TIMEOUT_MS, artifacts_dir
from tests.browser.test_play import join_as, player_token
from tests.support.web import open_round

pytestmark = pytest.mark.browser

CODE = re.compile(r"^[0-9A-Z]{5}(-[0-9A-Z]{5}){3}$")


def recovery_code(page):
    panel = page.get_by_test_id("recovery-panel")
    expect(panel, "the code is shown once, after joining").to_be_visible()
    code = page.get_by_test_id("recovery-code").text_content()
    assert code is not None
    assert CODE.match(code), code
    return code


def test_a_second_browser_signs_in_with_the_recovery_code(served, browser, page, screenshot):
    join_as(page, "Ada")
    code = recovery_code(page)
    assert code not in page.evaluate("() => JSON.stringify(localStorage)"), "the code is not kept here"
    screenshot("recovery-code-shown")
    page.get_by_test_id("recovery-done").click()
    expect(page.get_by_test_id("recovery-panel")).to_be_hidden()
    first = player_token(page)

    phone = browser.new_context(viewport={"width": 375, "height": 800}, base_url=served.url)
    phone.set_default_timeout(TIMEOUT_MS)
    other = phone.new_page()
    try:
        other.goto("/")
        expect(other.get_by_test_id("join-form")).to_be_visible()
        other.get_by_text("Sign in with your recovery code").click()
        other.get_by_test_id("recovery-input").fill(code.lower().replace("-", " "))
        other.get_by_test_id("recover").click()
        expect(other.get_by_test_id("game"), "signed in on the second device").to_be_visible()
        expect(other.get_by_test_id("player-name")).to_have_text("Ada")
        second = player_token(other)
        other.screenshot(path=str(artifacts_dir() / "recovery-second-device-phone.png"), full_page=True)
    finally:
        phone.close()
    assert second != first
    with served.client(first) as laptop, served.client(second) as tablet:
        assert laptop.get("/api/me").status_code == 200, "the first browser keeps playing"
        assert tablet.get("/api/me").json()["name"] == "Ada"


def test_a_wrong_recovery_code_says_so(served, page, screenshot):
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto("/")
    page.get_by_text("Sign in with your recovery code").click()
    page.get_by_test_id("recovery-input").fill("ABCDE-FGHJK-MNPQR-STVWX")
    page.get_by_test_id("recover").click()
    expect(page.get_by_test_id("message")).to_contain_text("does not sign anyone in")
    expect(page.get_by_test_id("join-form")).to_be_visible()
    screenshot("recovery-wrong-code-phone")


def test_log_out_warns_first_and_can_show_a_new_code(served, page, screenshot):
    join_as(page, "Ada")
    old_code = recovery_code(page)
    page.get_by_test_id("recovery-done").click()
    token = player_token(page)
    page.get_by_test_id("leave").click()
    dialog = page.get_by_test_id("signout-dialog")
    expect(dialog, "a warning, not an instant logout").to_be_visible()
    expect(dialog).to_contain_text("Without your recovery code this player cannot be reached again")
    page.get_by_test_id("signout-cancel").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("game"), "staying signed in changes nothing").to_be_visible()
    with served.client(token) as ada:
        assert ada.get("/api/me").status_code == 200

    page.get_by_test_id("leave").click()
    page.get_by_test_id("signout-new-code").click()
    expect(page.get_by_test_id("signout-code")).to_have_text(CODE)
    new_code = page.get_by_test_id("signout-code").text_content()
    screenshot("signout-warning")
    page.get_by_test_id("signout-confirm").click()
    expect(page.get_by_test_id("join-form")).to_be_visible()
    with served.client() as anon, served.client(token) as ada:
        assert ada.get("/api/me").status_code == 401, "logged out: the token is revoked"
        assert anon.post("/api/recover", json={"code": old_code}).status_code == 401, "the old code is gone"
        back = anon.post("/api/recover", json={"code": new_code})
        assert back.status_code == 200
        assert back.json()["name"] == "Ada"


def test_the_servers_name_refusal_is_shown_and_the_field_counts_code_points(served, page):
    page.goto("/")
    page.get_by_test_id("name").fill("x" * 33)
    expect(page.get_by_test_id("name-count")).to_have_text("33/32")
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("message"), "the server's words").to_contain_text("at most 32 characters")
    wide = "\U0001d543" * 32  # MATHEMATICAL DOUBLE-STRUCK CAPITAL L: two UTF-16 units each
    page.get_by_test_id("name").fill(wide)
    assert page.get_by_test_id("name").input_value() == wide, "not cut to 16 characters"
    expect(page.get_by_test_id("name-count")).to_have_text("32/32")
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("player-name"), "NFKC: 32 L").to_have_text("L" * 32)


def test_the_help_names_the_real_number_of_keys(served, operator, page):
    open_round(operator)
    join_as(page, "Ada")
    expect(page.get_by_test_id("key")).to_have_count(8)
    expect(page.get_by_test_id("key-count")).to_have_text("8")
    expect(page.get_by_test_id("board-panel")).to_contain_text("1\u20138 pick a key")


def test_no_404_is_asked_for_while_no_round_is_open(served, operator, page):
    answers: list[tuple[int, str]] = []
    page.on("response", lambda response: answers.append((response.status, response.url)))
    join_as(page, "Ada")
    expect(page.get_by_test_id("message")).to_contain_text("No round is open")
    page.wait_for_timeout(3500)  # the page asks again every 3 s
    open_round(operator)
    expect(page.get_by_test_id("round-status"), "the round is found when it opens").to_have_text("open")
    assert [url for status, url in answers if "/api/" in url and status == 404] == []
    assert any("/api/lobby" in url for _, url in answers), "it asked the lobby (the open rounds)"


def test_the_indicator_says_the_server_is_unreachable(served, operator, page, request):
    open_round(operator)
    join_as(page, "Ada")
    expect(page.get_by_test_id("live")).to_have_attribute("data-live", "live")
    served.stop()
    live = page.get_by_test_id("live")
    expect(live, "down is not 'polling'").to_have_attribute("data-live", "unreachable")
    expect(live).to_contain_text("server unreachable")
    console = request.node.stash[CONSOLE]  # the browser logs the cut stream and each refused call
    refused = "Failed to load resource: net::ERR_"
    console.problems[:] = [line for line in console.problems if refused not in line]


def test_the_proof_pages_new_player_asks_before_forgetting_the_player(served, page):
    join_as(page, "Ada")
    token = player_token(page)
    page.goto("/proof")
    expect(page.get_by_test_id("player-name")).to_have_text("Ada")
    asked: list[str] = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.get_by_test_id("proof-rejoin").click()
    expect(page.get_by_test_id("player-name")).to_have_text("Ada")
    assert asked, "a warning first"
    assert "recovery code" in asked[0]
    assert player_token(page) == token, "dismissed: the player is kept in this browser"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_test_id("proof-rejoin").click()
    expect(page.get_by_test_id("player-name")).not_to_have_text("Ada")
