"""Rounds on a clock in a real browser, with the real score worker process keeping the schedule: a round
ends on its clock while the player watches its countdown, the winners are announced and the next round
opens; two open rounds are both reachable from the lobby (the guesses of each kept); the history page
shows a closed round's code, its final board and the player's own guesses only."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_play import join_as, key_button
from tests.support.web import open_round, secret_of, wait_until

pytestmark = pytest.mark.browser

PHONE = {"width": 375, "height": 800}
WRONG = ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑"]


def _schedule(sync_redis, tag, *, duration_s, gap_s):
    """serve's round settings (codemojex.schedule.write_settings), for the test's worker to keep."""
    sync_redis.hset(
        f"cmx:{{{tag}}}:round_settings",
        mapping={"on": 1, "duration_ms": int(duration_s * 1000), "gap_ms": int(gap_s * 1000)},
    )


def _fresh_round(anon, at_least_ms):
    """A scheduled round just opened: at least ``at_least_ms`` of it left (a setup condition)."""
    lobby = anon.get("/api/lobby").json()
    for the_round in lobby["rounds"]:
        if the_round["closes_ms"] and the_round["closes_ms"] - lobby["server_ms"] >= at_least_ms:
            return the_round
    return None


def _type_guess(page, guess):
    for key in guess:
        key_button(page, key).click()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("message")).to_contain_text("Admitted")


def test_a_round_ends_on_its_clock_the_winner_is_announced_and_the_next_opens(
    served, anon, join, sync_redis, tag, score_worker, page, screenshot
):
    _schedule(sync_redis, tag, duration_s=5, gap_s=1)
    first = wait_until(lambda: _fresh_round(anon, 4000), what="a fresh scheduled round")
    rid = first["round_id"]
    _, bob = join("Bob")
    secret = "".join(secret_of(sync_redis, tag, rid))
    assert bob.post(f"/api/rounds/{rid}/guesses", json={"guess": secret}).status_code == 202

    join_as(page, "Ada")
    expect(page.get_by_test_id("round-id")).to_have_text(rid)
    expect(page.get_by_test_id("round-timer")).to_contain_text("closes in")
    expect(page.locator(f'[data-testid="lobby-round"][data-round="{rid}"]')).to_have_attribute(
        "aria-current", "true"
    )
    screenshot("rounds-countdown")

    # The round ends on its clock while the page watches: closed, the code shown, the winner announced.
    expect(page.get_by_test_id("round-status")).to_have_text("closed")
    expect(page.get_by_test_id("secret")).to_have_text(" ".join(secret_of(sync_redis, tag, rid)))
    expect(page.get_by_test_id("winner-headline")).to_contain_text("Won by Bob")
    expect(page.get_by_test_id("winner")).to_have_count(1)
    screenshot("rounds-winner")

    # The schedule opens the next round after the gap: offered, then played.
    expect(page.get_by_test_id("next-round")).to_be_visible()
    page.get_by_test_id("next-round").click()
    expect(page.get_by_test_id("round-id")).not_to_have_text(rid)
    expect(page.get_by_test_id("round-status")).to_have_text("open")
    expect(page.get_by_test_id("round-closed")).to_be_hidden()


def test_the_player_switches_between_two_open_rounds(served, operator, score_worker, page, screenshot):
    older = open_round(operator)["round_id"]
    newer = open_round(operator)["round_id"]
    join_as(page, "Ada")
    expect(page.get_by_test_id("round-id")).to_have_text(newer)
    expect(page.get_by_test_id("lobby-round")).to_have_count(2)

    page.locator(f'[data-testid="lobby-round"][data-round="{older}"]').click()
    expect(page.get_by_test_id("round-id")).to_have_text(older)
    _type_guess(page, WRONG)
    expect(page.get_by_test_id("guess-row")).to_have_count(1)

    page.locator(f'[data-testid="lobby-round"][data-round="{newer}"]').click()
    expect(page.get_by_test_id("round-id")).to_have_text(newer)
    expect(page.get_by_test_id("guess-row")).to_have_count(0)

    page.locator(f'[data-testid="lobby-round"][data-round="{older}"]').click()
    expect(page.get_by_test_id("guess-row"), "the older round's guesses are still there").to_have_count(1)
    page.reload()
    expect(page.get_by_test_id("round-id"), "a reload comes back to the round picked").to_have_text(older)
    expect(page.get_by_test_id("guess-row")).to_have_count(1)
    screenshot("rounds-lobby-desktop")
    page.set_viewport_size(PHONE)
    expect(page.locator(f'[data-testid="lobby-round"][data-round="{newer}"]')).to_be_in_viewport()
    screenshot("rounds-lobby-phone")


def test_the_history_page_shows_the_code_the_board_and_my_guesses_only(
    served, operator, anon, join, sync_redis, tag, score_worker, page, screenshot
):
    rid = open_round(operator)["round_id"]
    secret = secret_of(sync_redis, tag, rid)
    _, bob = join("Bob")
    assert bob.post(f"/api/rounds/{rid}/guesses", json={"guess": "".join(secret)}).status_code == 202
    join_as(page, "Ada")
    _type_guess(page, WRONG)
    expect(page.get_by_test_id("guess-row")).to_have_count(1)
    assert operator.post(f"/api/operator/rounds/{rid}/close").status_code == 200
    wait_until(lambda: anon.get(f"/api/history/{rid}").status_code == 200, what="the conclusion")

    page.get_by_test_id("nav-history").click()
    card = page.locator(f'[data-testid="history-round"][data-round="{rid}"]')
    expect(card.get_by_test_id("history-secret")).to_have_text(" ".join(secret))
    expect(card.get_by_test_id("history-counts")).to_have_text("2 players, 2 guesses")
    card.locator("summary").click()
    expect(card.get_by_test_id("history-winner")).to_have_count(2)
    expect(card.get_by_test_id("history-winner").first).to_contain_text("Bob")
    mine = card.get_by_test_id("my-guess")
    expect(mine, "Ada's own guess, never Bob's").to_have_count(1)
    expect(mine).to_contain_text("".join(WRONG))
    screenshot("history-desktop")
    page.set_viewport_size(PHONE)
    screenshot("history-phone")
