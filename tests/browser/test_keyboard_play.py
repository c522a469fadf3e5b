"""Playing with the keyboard alone, in a real browser: Tab reaches the slots, the on-screen keys, Submit and
Clear in that order; Enter (or Space) on a focused on-screen key types that key, never submits; Enter on a
focused slot moves the cursor there and keeps the focus; Ctrl+Enter submits from anywhere on the board,
and the focus stays where it was."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_play import join_as, key_button, slot
from tests.support.web import open_round

pytestmark = pytest.mark.browser


def focused(page: Page) -> str:
    """The focused element as ``testid[:position or key]``."""
    described: str = page.evaluate(
        """() => {
          const n = document.activeElement;
          if (!n || n === document.body) return "body";
          const id = n.dataset.testid || n.tagName.toLowerCase();
          const which = n.dataset.position ?? n.dataset.key;
          return which === undefined ? id : `${id}:${which}`;
        }"""
    )
    return described


def test_the_board_is_played_from_the_keyboard_alone(served, operator, score_worker, page, screenshot):
    the_round = open_round(operator)
    keyboard = the_round["keyboard"]
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" and "/guesses" in r.url else None)
    join_as(page, "Ada")
    expect(page.get_by_test_id("key")).to_have_count(len(keyboard))

    # Focus order: the six slots (no lock toggles before a proven hit), every key, then Clear (Submit is
    # disabled while nothing is typed, so Tab passes it by). Other controls may sit between them.
    slot(page, 0).focus()
    order = [focused(page)]
    while order[-1] != "clear" and len(order) < 60:
        page.keyboard.press("Tab")
        order.append(focused(page))
    ours = [name for name in order if name.split(":")[0] in ("slot", "key", "submit", "clear")]
    assert ours == [
        *(f"slot:{i}" for i in range(6)),
        *(f"key:{key}" for key in keyboard),
        "clear",
    ], order

    # Enter on a focused key types it (it does not submit), and the focus stays on the key.
    key_button(page, keyboard[2]).focus()
    page.keyboard.press("Enter")
    expect(slot(page, 0)).to_contain_text(keyboard[2])
    expect(slot(page, 1), "the cursor moved on").to_have_attribute("data-active", "1")
    assert focused(page) == f"key:{keyboard[2]}", "typing keeps the focus on the key"
    expect(page.get_by_test_id("message"), "Enter on a key does not try to submit").to_be_hidden()

    # Space types too; Tab then Enter types the next key.
    page.keyboard.press(" ")
    expect(slot(page, 1)).to_contain_text(keyboard[2])
    page.keyboard.press("Tab")
    assert focused(page) == f"key:{keyboard[3]}"
    page.keyboard.press("Enter")
    expect(slot(page, 2)).to_contain_text(keyboard[3])

    # Enter on a focused slot moves the cursor there; the slot keeps the focus through the redraw.
    slot(page, 1).focus()
    page.keyboard.press("Enter")
    expect(slot(page, 1)).to_have_attribute("data-active", "1")
    assert focused(page) == "slot:1", "the slot keeps the focus after the cursor moved to it"

    # Fill the rest from the keys; the guess is complete only after the sixth.
    key_button(page, keyboard[0]).focus()
    for _ in range(5):  # positions 1..5
        page.keyboard.press("Enter")
    for position in range(1, 6):
        expect(slot(page, position)).to_contain_text(keyboard[0])
    expect(page.get_by_test_id("submit")).to_be_enabled()
    assert posted == [], "no Enter on a key submitted anything"

    # Ctrl+Enter submits from the focused key; the focus stays on the key.
    page.keyboard.press("Control+Enter")
    expect(page.get_by_test_id("guess-row")).to_have_count(1)
    assert len(posted) == 1, posted
    expect(page.get_by_test_id("guess-state").first).to_have_attribute("data-state", "scored")
    assert focused(page) == f"key:{keyboard[0]}", "the focus is not lost to the page after submitting"
    screenshot("keyboard-play")

    # The help says how.
    help_text = page.locator('[data-testid="board-panel"] .help').first
    expect(help_text).to_contain_text("Ctrl")
    expect(help_text).to_contain_text("Enter")
