"""The Play page in a real browser: a new player joins, plays a round to the solve on the page's own
keyboard (mouse clicks and digit keys), with the real score worker scoring every guess; a locked hit is
sent blank and filled in by the server; and the page fits a phone's width."""

from __future__ import annotations

import random
import re

import pytest
from playwright.sync_api import expect

from codemojex.engine import Mark, score
from tests.support.web import open_round, secret_of

pytestmark = pytest.mark.browser

SYMBOL = {Mark.HIT: "✓", Mark.NEAR: "↔", Mark.MISS: "✕"}  # a symbol per kind, not only a colour


def guess_with_every_mark(secret, keyboard, *, seed, keep=None):
    """A wrong guess whose feedback has a hit, a near and a miss (the engine decides), keeping
    ``keep``'s positions as they are in the secret; with a secret of one repeated key no guess has a
    near, and then a wrong guess with a hit and a miss does."""
    rng = random.Random(seed)
    keep = keep or {}
    fallback = None
    for _ in range(20_000):
        guess = [keep.get(i) or rng.choice(keyboard) for i in range(6)]
        marks = set(score(secret, guess).marks)
        if guess == list(secret) or Mark.HIT not in marks or Mark.MISS not in marks:
            continue
        if Mark.NEAR in marks:
            return guess
        fallback = fallback or guess
    assert fallback is not None, f"no wrong guess with a hit and a miss for the secret {secret}"
    return fallback


def slot(page, position):
    return page.locator(f'[data-testid="slot"][data-position="{position}"]')


def key_button(page, key):
    return page.get_by_test_id("keyboard").locator(f'[data-testid="key"][data-key="{key}"]')


def join_as(page, name):
    page.goto("/")
    expect(page.get_by_test_id("join-form"), "a new browser is shown the join form").to_be_visible()
    page.get_by_test_id("name").fill(name)
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("game"), "after joining the game is shown").to_be_visible()
    expect(page.get_by_test_id("join-form")).to_be_hidden()
    expect(page.get_by_test_id("player-name")).to_have_text(name)


def expect_scored_row(page, count, guess, secret):
    """The newest of ``count`` guess rows shows ``guess``, scored, with the engine's marks."""
    rows = page.get_by_test_id("guess-row")
    expect(rows, f"guess {count} is listed").to_have_count(count)
    row = rows.first  # newest first
    expect(row.get_by_test_id("guess-state"), f"guess {count} is scored by the worker").to_have_text("scored")
    expect(row).to_have_attribute("data-state", "scored")
    expect(row, f"guess {count} shows the six keys as scored").to_contain_text("".join(guess))
    feedback = score(secret, guess)
    marks = row.get_by_test_id("mark")
    expect(marks, f"guess {count}: the marks of {guess} against {secret}").to_have_class(
        [re.compile(rf"(^|\s){mark.value}(\s|$)") for mark in feedback.marks]
    )
    expect(marks).to_have_text([SYMBOL[mark] for mark in feedback.marks])
    return feedback


def player_token(page):
    token = page.evaluate("() => localStorage.getItem('cmx.token')")
    assert token, "the page stores the player's token after joining"
    return token


def test_a_new_player_plays_a_round_to_the_solve(
    served, operator, sync_redis, tag, score_worker, page, screenshot
):
    the_round = open_round(operator)
    round_id, keyboard = the_round["round_id"], the_round["keyboard"]
    secret = secret_of(sync_redis, tag, round_id)

    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    join_as(page, "Ada")
    expect(page.get_by_test_id("round-id")).to_have_text(round_id)
    expect(page.get_by_test_id("round-status")).to_have_text("open")
    expect(page.get_by_test_id("key"), "the round's keyboard, one button per key").to_have_text(
        [re.compile(re.escape(key)) for key in keyboard]
    )
    expect(page.get_by_test_id("live"), "the page follows the server's events").to_have_attribute(
        "data-live", "live"
    )
    streams = [url for url in urls if "/api/events?" in url]
    assert streams, "the page opened an event stream"
    assert all("ticket=" in url and "token" not in url for url in streams)  # a ticket, never the token
    assert not any(player_token(page) in url for url in urls)
    # Nothing at sign-up: the round's allowance (3 tickets) comes with the first guess, as the page says.
    expect(page.locator('[data-testid="balance"][data-currency="ticket"]')).to_have_text("0")
    expect(page.get_by_test_id("economy")).to_contain_text("tops you up to 3 tickets and 50 coins")
    expect(page.get_by_test_id("price")).to_have_text("next guess: 1 ticket")
    expect(page.get_by_test_id("submit"), "nothing to submit before six keys").to_be_disabled()

    # Guess 1, with the mouse: a wrong guess that earns a hit, a near and a miss.
    first = guess_with_every_mark(secret, keyboard, seed=1)
    for key in first:
        key_button(page, key).click()
    for position, key in enumerate(first):
        expect(slot(page, position)).to_have_attribute("data-filled", "1")
        expect(slot(page, position)).to_contain_text(key)
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("message")).to_contain_text("Admitted, charged 1 ticket")
    feedback = expect_scored_row(page, 1, first, secret)
    expect(page.locator('[data-testid="balance"][data-currency="ticket"]')).to_have_text("2")

    # Lock a position the first guess proved a hit: the slot shows the key and is left out of the typing.
    hit = feedback.marks.index(Mark.HIT)
    toggle = page.locator(f'[data-testid="lock-toggle"][data-position="{hit}"]')
    expect(toggle, f"position {hit + 1} is a proven hit, so it can be locked").to_have_attribute(
        "data-locked", "0"
    )
    toggle.click()
    expect(slot(page, hit)).to_have_attribute("data-locked", "1")
    expect(slot(page, hit)).to_contain_text(secret[hit])
    expect(page.get_by_test_id("message")).to_contain_text(f"Position {hit + 1} locked to {secret[hit]}")

    # Guess 2, typed as digits, the locked slot left blank: the server overlays the locked key.
    second = guess_with_every_mark(secret, keyboard, seed=2, keep={hit: secret[hit]})
    submitted = type_guess(page, keyboard, second, locked=hit, enter=False)
    assert submitted[hit] is None, f"the locked position is sent blank, got {submitted}"
    expect_scored_row(page, 2, second, secret)
    expect(page.get_by_test_id("guess-row").first.get_by_test_id("mark").nth(hit)).to_have_class(
        re.compile(r"\bhit\b")
    )

    # Guess 3: the secret, typed, submitted with Enter.
    submitted = type_guess(page, keyboard, secret, locked=hit, enter=True)
    assert submitted[hit] is None, f"the locked position is sent blank, got {submitted}"
    expect_scored_row(page, 3, secret, secret)
    expect(page.get_by_test_id("solved"), "the solve is announced").to_be_visible()
    expect(page.get_by_test_id("solved")).to_have_text("🎉 Solved in 3 attempts!")
    expect(page.get_by_test_id("submit"), "no more guesses once solved").to_be_disabled()
    player_id = page.evaluate("() => localStorage.getItem('cmx.player_id')")
    mine = page.locator(f'[data-testid="board-row"][data-player="{player_id}"]')
    expect(mine, "the leaderboard marks the caller's own row").to_have_class(re.compile(r"\bme\b"))
    expect(mine).to_contain_text("Ada (you)")
    expect(mine.get_by_test_id("board-solved"), "the leaderboard shows the player solved").to_have_text("✅")
    expect(mine.get_by_test_id("board-hits")).to_have_text("6")
    expect(mine.get_by_test_id("board-attempts")).to_have_text("3")
    expect(mine).to_have_attribute("data-rank", "1")
    expect(page.get_by_test_id("board-rules"), "the page states the ranking rule").to_contain_text(
        "Solved players rank by who solved first"
    )
    expect(page.locator('[data-testid="balance"][data-currency="ticket"]')).to_have_text("0")
    screenshot("play-solved")

    with served.client(player_token(page)) as ada:
        stored = ada.get(f"/api/rounds/{round_id}/guesses").json()
    assert [g["guess"] for g in stored["guesses"]] == [first, second, list(secret)], (
        "the server stored the guesses as the page showed them, the locked key overlaid"
    )
    assert [g["state"] for g in stored["guesses"]] == ["scored"] * 3
    assert stored["locks"] == {str(hit): secret[hit]}
    assert stored["guesses"][-1]["feedback"]["solved"] is True


def type_guess(page, keyboard, guess, *, locked, enter):
    """Type ``guess`` as the keys' digits (1-9) into the unlocked slots and submit it; returns the guess
    the page sent."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")  # digits go to the page
    for position, key in enumerate(guess):
        if position != locked:
            page.keyboard.press(str(keyboard.index(key) + 1))
    for position, key in enumerate(guess):
        expect(slot(page, position)).to_contain_text(key)
    expect(slot(page, locked)).to_have_attribute("data-locked", "1")
    expect(page.get_by_test_id("submit")).to_be_enabled()
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/guesses")) as sent:
        if enter:
            page.keyboard.press("Enter")
        else:
            page.get_by_test_id("submit").click()
    guess_sent: list[str | None] = sent.value.post_data_json["guess"]
    return guess_sent


def test_at_phone_width_the_page_fits_and_its_keys_work(
    operator, sync_redis, tag, score_worker, page, screenshot
):
    the_round = open_round(operator)
    secret = secret_of(sync_redis, tag, the_round["round_id"])
    page.set_viewport_size({"width": 375, "height": 740})
    join_as(page, "Bo")
    expect(page.get_by_test_id("key")).to_have_count(len(the_round["keyboard"]))

    def assert_no_horizontal_scroll(when):
        widths = page.evaluate(
            "() => ({scroll: document.scrollingElement.scrollWidth, inner: window.innerWidth})"
        )
        assert widths["scroll"] <= widths["inner"], f"{when}: the page scrolls sideways at 375 px: {widths}"

    assert_no_horizontal_scroll("after joining")
    for key in the_round["keyboard"]:
        box = key_button(page, key).bounding_box()
        assert box is not None, f"the key {key} is not laid out"
        assert box["x"] >= 0, f"the key {key} starts left of the screen: {box}"
        assert box["x"] + box["width"] <= 375, f"the key {key} ends right of the screen: {box}"

    guess = the_round["keyboard"][:6]
    for key in guess:
        key_button(page, key).click()  # Playwright clicks only what is visible, stable and not covered
    for position, key in enumerate(guess):
        expect(slot(page, position)).to_contain_text(key)
    page.get_by_test_id("submit").click()
    expect_scored_row(page, 1, guess, secret)
    assert_no_horizontal_scroll("with a scored guess")
    screenshot("play-phone")
