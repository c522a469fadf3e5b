"""Accessibility in a real browser: axe-core finds no serious or critical violation on any page; hit, near
and miss are told apart without colour; at a phone's width the leaderboard shows every column and every
scrolling region can be reached from the keyboard.

axe-core is the npm package, installed from ``tests/browser/axe/package-lock.json`` by ``make test`` (its
``npm ci`` step) and read from that folder: nothing is fetched while the tests run. Playwright injects a
script file as an inline ``<script>``, which the pages' strict Content-Security-Policy (``script-src
'self'``) refuses, so the pages of this module's ``page`` fixture run in a context with ``bypass_csp``:
for the axe audit only (tests/browser/test_security.py checks the policy itself).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from codemojex.engine import Mark
from echomq import ids
from tests.browser.conftest import REQUIRE_ENV, VIEWPORT, open_page
from tests.browser.test_play import SYMBOL, guess_with_every_mark, join_as, key_button
from tests.support.web import OPERATOR, dead_letter, demo_round, open_round, secret_of, wait_until

pytestmark = pytest.mark.browser

AXE = Path(__file__).parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 375, "height": 740}
DEAD_JOB = ids.mint("JOB")  # fresh: an id minted over 24 h ago is refused (echomq.ids)
# What the audit fails on: axe's two worst impacts, and the rules the issue named whatever their impact
# (a page without an h1 is "moderate", an empty table header "minor"). Others are printed, not failed.
FAILING = ("serious", "critical")
NAMED_RULES = ("page-has-heading-one", "empty-table-header", "scrollable-region-focusable", "label")


@pytest.fixture
def page(browser: Browser, served: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    """As the folder's ``page`` (a fresh context, console errors fail the test), with ``bypass_csp``: the
    audit's axe.min.js is injected as an inline script, which the pages' CSP would refuse. For the axe
    test only; every other browser test runs under the policy."""
    yield from open_page(browser, served, request, bypass_csp=True)


# Swagger UI's own markup and style sheet at /docs (a third-party bundle served as shipped): its method
# badges and version stamps fall short of the contrast ratio, and each operation's summary is a button
# holding other buttons. Not ours to fix; every other rule runs there too.
SWAGGER_UI_OWN = ("color-contrast", "nested-interactive")


def audit(page: Page, where: str, *, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Run axe-core on the page as it is (less the ``skip`` rules); fail on a serious or critical
    violation or one of :data:`NAMED_RULES`, naming each."""
    if not AXE.exists():
        reason = f"axe-core is not installed at {AXE} (make test runs npm ci in {AXE.parent})"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    if not page.evaluate("() => Boolean(window.axe)"):
        page.add_script_tag(path=str(AXE))
    violations: list[dict[str, Any]] = page.evaluate(
        """async (skip) => {
          const rules = Object.fromEntries(skip.map((id) => [id, {enabled: false}]));
          const result = await axe.run(document, {resultTypes: ["violations"], rules});
          return result.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map((n) => `${n.target.join(" ")}: ${n.failureSummary}`),
          }));
        }""",
        list(skip),
    )
    for v in violations:
        print(f"axe on {where}: {v['impact']} {v['id']} ({v['help']}): {len(v['nodes'])} nodes")
    failing = [v for v in violations if v["impact"] in FAILING or v["id"] in NAMED_RULES]
    described = "\n".join(
        f"  {v['impact']} {v['id']} ({v['help']}):\n    " + "\n    ".join(v["nodes"][:5]) for v in failing
    )
    assert not failing, f"axe-core on {where}:\n{described}"
    return violations


def play_one_guess(page: Page, secret: list[str], keyboard: list[str]) -> None:
    """Submit a wrong guess with a hit, a near and a miss (mouse) and wait for its scored row."""
    for key in guess_with_every_mark(secret, keyboard, seed=7):
        key_button(page, key).click()
    page.get_by_test_id("submit").click()
    expect(page.get_by_test_id("guess-state").first).to_have_attribute("data-state", "scored")


def test_axe_finds_nothing_serious_on_any_page(
    served, operator, sync_redis, tag, redis_server, run_in_thread, score_worker, join, page
):
    the_round = open_round(operator)
    secret = secret_of(sync_redis, tag, the_round["round_id"])
    _, rival = join("Rival")
    rival.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": the_round["keyboard"][:6]})

    page.goto("/")
    expect(page.get_by_test_id("join-form")).to_be_visible()
    audit(page, "the play page before joining")

    join_as(page, "Ada")
    play_one_guess(page, secret, the_round["keyboard"])
    expect(page.get_by_test_id("board-row"), "the board lists both players").to_have_count(2)
    audit(page, "the play page with a scored guess and a leaderboard")
    page.set_viewport_size(PHONE)
    audit(page, "the play page at 375 px")
    page.set_viewport_size(VIEWPORT)

    page.goto("/dashboard")
    expect(page.get_by_test_id("operator-form")).to_be_visible()
    audit(page, "the dashboard's token form")
    page.goto(f"/dashboard#operator={OPERATOR}")
    expect(page.get_by_test_id("round-keyboard")).not_to_be_empty()
    expect(
        page.get_by_test_id("lane-row").or_(page.locator('[data-testid="lanes"] tr.empty'))
    ).not_to_have_count(0)
    audit(page, "the dashboard")
    page.get_by_test_id("open-round").click()
    page.get_by_test_id("open-form").locator('[name="duration_s"]').fill("0")
    page.get_by_test_id("open-submit").click()
    expect(page.get_by_test_id("open-error")).to_be_visible()
    audit(page, "the dashboard's new-round form with a refused option")
    page.get_by_test_id("close-round").click()
    expect(page.get_by_test_id("confirm")).to_be_visible()
    audit(page, "the dashboard's confirmation of a close")
    page.get_by_test_id("confirm-no").click()
    page.set_viewport_size(PHONE)
    audit(page, "the dashboard at 375 px")
    page.set_viewport_size(VIEWPORT)

    run_in_thread(demo_round(redis_server.url, tag))
    page.goto("/proof")
    expect(page.get_by_test_id("player-name"), "the proof page plays as the same player").to_have_text("Ada")
    page.get_by_test_id("proof-new").click()
    expect(page.get_by_test_id("job-id")).to_have_text(re.compile(r"^JOB"))
    audit(page, "the proof page with a picked job")

    page.goto("/docs")
    expect(page.locator(".opblock").first).to_be_visible()
    audit(page, "the API docs (Swagger UI)", skip=SWAGGER_UI_OWN)

    rid = the_round["round_id"]
    assert operator.post(f"/api/operator/rounds/{rid}/close").status_code == 200
    wait_until(lambda: rival.get(f"/api/history/{rid}").status_code == 200, what="the round's conclusion")
    page.goto("/")
    expect(page.get_by_test_id("message")).to_contain_text("No round is open")
    audit(page, "the play page while no round is open")
    page.goto("/history")
    card = page.locator(f'[data-testid="history-round"][data-round="{rid}"]')
    card.locator("summary").click()
    expect(card.get_by_test_id("my-guess")).to_have_count(1)
    audit(page, "the history page with a round opened")
    page.set_viewport_size(PHONE)
    audit(page, "the history page at 375 px")


def test_hit_near_and_miss_differ_without_colour(
    served, operator, sync_redis, tag, score_worker, page, screenshot
):
    the_round = open_round(operator)
    secret = secret_of(sync_redis, tag, the_round["round_id"])
    join_as(page, "Ada")
    play_one_guess(page, secret, the_round["keyboard"])

    marks = page.get_by_test_id("guess-row").first.get_by_test_id("mark")
    seen: dict[str, str] = {}
    for i in range(marks.count()):
        mark = marks.nth(i)
        kind = mark.get_attribute("data-mark")
        assert kind in ("hit", "near", "miss"), kind
        seen[kind] = mark.text_content() or ""
        expect(mark, "a screen reader names the mark in words").to_have_accessible_name(
            re.compile(rf"^position {i + 1}: {kind}\b")
        )
    assert {"hit", "miss"} <= set(seen), f"the guess shows a hit and a miss: {seen}"
    assert len(set(seen.values())) == len(seen), f"each kind of mark has its own symbol: {seen}"
    for kind, text in seen.items():
        assert text == SYMBOL[Mark(kind)], f"the {kind} mark shows {text!r}"

    legend = page.get_by_test_id("marks-legend")
    for kind, symbol in SYMBOL.items():
        expect(legend.locator(f'[data-mark="{kind.value}"]'), "the legend explains each symbol").to_have_text(
            symbol
        )
    expect(legend).to_contain_text("hit")
    expect(legend).to_contain_text("near")
    expect(legend).to_contain_text("miss")

    # What a reader without colour vision sees: the symbols stay apart (looked at in the screenshot).
    page.add_style_tag(content="html { filter: grayscale(1); }")
    screenshot("a11y-marks-grayscale")


def test_at_phone_width_the_leaderboard_shows_every_column(
    served, operator, join, score_worker, page, screenshot
):
    the_round = open_round(operator)
    for name in ("Bartholomew-the-long-named", "Cy"):
        _, rival = join(name)
        rival.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": the_round["keyboard"][:6]})
    join_as(page, "Ada")
    expect(page.get_by_test_id("board-row")).to_have_count(2)
    screenshot("a11y-play-desktop")

    page.set_viewport_size(PHONE)
    board = page.get_by_test_id("leaderboard")
    wrap = board.locator("xpath=..")
    for header in board.locator("thead th").all():
        box, frame = header.bounding_box(), wrap.bounding_box()
        assert box, "the leaderboard is laid out"
        assert frame, "the leaderboard is laid out"
        cut = f"the column {header.text_content()!r} is cut off at 375 px: {box} outside {frame}"
        assert box["x"] >= frame["x"] - 1, cut
        assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 1, cut
    sizes = wrap.evaluate("(n) => ({scroll: n.scrollWidth, client: n.clientWidth})")
    assert sizes["scroll"] <= sizes["client"], f"the leaderboard scrolls sideways at 375 px: {sizes}"
    expect(board.locator("thead th").last, "the solved column has a name").to_have_accessible_name(
        re.compile("solved", re.I)
    )
    screenshot("a11y-play-phone")


def test_every_scrolling_region_can_be_reached_from_the_keyboard(
    served, operator, join, redis_server, tag, run_in_thread, page, screenshot
):
    the_round = open_round(operator)
    player_id, _ = join("Bo")

    run_in_thread(  # a row wide enough to scroll sideways at 375 px
        dead_letter(
            redis_server.url,
            tag,
            the_round["round_id"],
            player_id,
            DEAD_JOB,
            "boom: the handler gave up on this guess for good",
        )
    )
    join_as(page, "Ada")
    page.goto(f"/dashboard#operator={OPERATOR}")
    expect(page.get_by_test_id("dead-row")).to_have_count(1)
    page.set_viewport_size(PHONE)
    for path in ("/", "/dashboard", "/proof"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        for region in page.locator(".table-wrap, .log").all():
            if not region.is_visible():
                continue
            expect(region, f"{path}: a scrolling region is in the tab order").to_have_attribute(
                "tabindex", "0"
            )
            expect(region, f"{path}: a scrolling region says what it holds").to_have_accessible_name(
                re.compile(r"\S")
            )
        screenshot(f"a11y-phone-{path.strip('/') or 'play'}")

    page.goto("/dashboard")
    dead = page.get_by_test_id("dead").locator("xpath=..")
    expect(page.get_by_test_id("dead-row")).to_have_count(1)
    assert dead.evaluate("(n) => n.scrollWidth > n.clientWidth"), "the dead letters scroll sideways at 375 px"
    dead.focus()
    retry = dead.get_by_test_id("dead-retry")
    for _ in range(40):  # the arrow keys scroll the focused region (40 px a press)
        if retry.evaluate(
            "(b) => b.getBoundingClientRect().right <= b.closest('.table-wrap').getBoundingClientRect().right"
        ):
            break
        page.keyboard.press("ArrowRight")
    assert dead.evaluate("(n) => n.scrollLeft") > 0, "the arrow keys scrolled the focused region"
    retry_box, frame = retry.bounding_box(), dead.bounding_box()
    assert retry_box, "the retry button is laid out"
    assert frame, "the dead letters are laid out"
    assert retry_box["x"] + retry_box["width"] <= frame["x"] + frame["width"] + 1, "scrolled into view"
