"""What players of this kind of game expect, in a real browser with the real score worker: the keyboard
marks keys proved in or out, the last guess comes back to edit, the share grid is shown and copied, the
stats count the solve, and a second player watching the round sees a notice of the solve."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_play import join_as, key_button, slot
from tests.support.web import open_round, secret_of

pytestmark = pytest.mark.browser

ROW = "(?:🟩|🟨|⬜){6}"  # one row of the grid (alternation: a JS regex without "u" splits these in a class)


def test_marks_prefill_share_and_stats(served, operator, sync_redis, tag, score_worker, page, screenshot):
    """One scored guess marks its keys (with a sign, not colour only); R fills the last guess back in to
    edit; the share grid holds squares only and is copied; the solve counts in the stats."""
    the_round = open_round(operator)
    round_id, keyboard = the_round["round_id"], the_round["keyboard"]
    secret = secret_of(sync_redis, tag, round_id)
    absent = next(key for key in keyboard if key not in secret)
    unguessed = [key for key in keyboard if key not in (secret[0], absent)]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    join_as(page, "Ada")
    expect(page.get_by_test_id("prefill"), "nothing to fill in before a first guess").to_be_disabled()

    first = [secret[0], *[absent] * 5]
    for key in first:
        key_button(page, key).click()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("guess-state").first).to_have_text("scored")

    known_in, known_out = key_button(page, secret[0]), key_button(page, absent)
    expect(known_in, "a key with a hit is in the code").to_have_attribute("data-mark", "in")
    expect(known_in.locator(".key-mark")).to_have_text("✓")
    expect(known_in).to_have_attribute("aria-label", re.compile(r"in the code$"))
    expect(known_out, "a key that only missed is out").to_have_attribute("data-mark", "out")
    expect(known_out.locator(".key-mark")).to_have_text("✗")
    expect(known_out).to_have_attribute("aria-label", re.compile(r"not in the code$"))
    for key in unguessed:
        expect(key_button(page, key), f"{key} was never guessed: no mark").to_have_attribute("data-mark", "")

    share = page.get_by_test_id("share-text")
    expect(share).to_have_text(re.compile(rf"^Codemojex {round_id} · 1 try, not solved\n{ROW}$"))
    page.get_by_test_id("share").locator("summary").click()
    page.get_by_test_id("share-copy").click()
    expect(page.get_by_test_id("share-copied")).to_have_text("Copied.")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied == share.text_content(), "the copied text is the shown grid"
    assert not set("".join(keyboard)) & set(copied), "no emoji of the keyboard in the shared text"

    # Prefill: the last guess comes back; edit the last five positions into the secret and submit.
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.keyboard.press("r")
    for position, key in enumerate(first):
        expect(slot(page, position), "R fills the last guess in").to_contain_text(key)
    for _ in range(5):
        page.keyboard.press("Backspace")
    expect(slot(page, 0), "the first position stays as filled").to_contain_text(secret[0])
    for key in secret[1:]:
        key_button(page, key).click()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("solved")).to_have_text("🎉 Solved in 2 attempts!")
    expect(share).to_have_text(re.compile(rf"^Codemojex {round_id} · solved in 2\n{ROW}\n(?:🟩){{6}}$"))
    expect(page.get_by_test_id("share"), "the grid opens by itself after the solve").to_have_attribute(
        "open", ""
    )
    stats = page.get_by_test_id("stats")
    expect(stats.get_by_test_id("stat-played")).to_have_text("1")
    expect(stats.get_by_test_id("stat-solved")).to_have_text("1")
    expect(stats.get_by_test_id("stat-best")).to_have_text("2")
    expect(stats.get_by_test_id("stat-streak")).to_have_text("1")
    expect(stats.get_by_test_id("stat-best-streak")).to_have_text("1")
    screenshot("play-aids")


def test_a_second_player_sees_the_solve_notice(
    served, operator, sync_redis, tag, score_worker, page, join, screenshot
):
    """Bob watches the round in his phone's browser; Ada solves over the API: Bob's page tells him,
    politely, and still fits the phone's width."""
    the_round = open_round(operator)
    round_id = the_round["round_id"]
    page.set_viewport_size({"width": 375, "height": 740})
    join_as(page, "Bob")
    expect(page.get_by_test_id("live")).to_have_attribute("data-live", "live")
    _, ada = join("Ada")
    ada.post(f"/api/rounds/{round_id}/guesses", json={"guess": secret_of(sync_redis, tag, round_id)})
    notices = page.get_by_test_id("notices")
    expect(notices).to_have_attribute("aria-live", "polite")
    expect(notices.get_by_test_id("notice")).to_have_text("🎉 Ada solved it in 1 attempt (rank 1).")
    widths = page.evaluate(
        "() => ({scroll: document.scrollingElement.scrollWidth, inner: window.innerWidth})"
    )
    assert widths["scroll"] <= widths["inner"], f"the page scrolls sideways at 375 px: {widths}"
    screenshot("play-notice-phone")
