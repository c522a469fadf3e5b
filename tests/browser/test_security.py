"""The pages under the strict Content-Security-Policy, in a real browser: no inline script or style is
refused on any page (a ``securitypolicyviolation`` event, or the console's "Refused to ..." error, which
the ``page`` fixture fails on), the styles moved from ``style="..."`` into style.css still apply, and
/docs runs Swagger UI from the host alone."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.web import OPERATOR, open_round

pytestmark = pytest.mark.browser

# Installed before any script of the page runs (Playwright's init scripts are not subject to the CSP).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  const where = `${event.sourceFile}:${event.lineNumber}`;
  window.__cspViolations.push(`${event.violatedDirective} ${event.blockedURI} ${where}`);
});
"""


def violations(page):
    return page.evaluate("() => window.__cspViolations")


def test_the_play_page_runs_under_the_policy(served, operator, score_worker, page):
    open_round(operator)
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto("/")
    page.get_by_test_id("name").fill("Ada")
    page.get_by_test_id("join").click()
    expect(page.get_by_test_id("game"), "the page's script runs: joining shows the game").to_be_visible()
    for position in range(6):
        page.get_by_test_id("keyboard").locator('[data-testid="key"]').nth(position % 2).click()
    page.get_by_test_id("submit").click()
    state = page.get_by_test_id("guess-state").first
    expect(state, "the guess is scored and its row drawn").to_have_attribute("data-state", "scored")
    # The style sheet applies (no inline style is needed): read through expect, which asks again when a
    # live update redraws the row between the locate and the read.
    guess_status = page.locator('.guess-status:has([data-testid="guess-state"])').first
    expect(guess_status).to_have_css("flex-direction", "column")
    expect(page.locator(".round-line")).to_have_css("margin-top", "8px")  # 0.5rem
    assert violations(page) == []


def test_the_proof_and_dashboard_pages_run_under_the_policy(served, operator, page):
    open_round(operator)
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto("/proof")
    expect(page.get_by_test_id("worker-alive"), "the page's script runs").to_have_text("no worker")
    assert violations(page) == []
    page.goto(f"/dashboard#operator={OPERATOR}")
    keyboard = page.get_by_test_id("round-keyboard")
    expect(keyboard, "the dashboard's script shows the open round").not_to_be_empty()
    expect(keyboard).to_have_css("font-size", "22.4px")  # .keyboard-line, 1.4rem
    assert violations(page) == []


def test_the_docs_run_swagger_ui_from_the_host(served, page):
    outside = []
    page.on(
        "request",
        lambda request: outside.append(request.url) if not request.url.startswith(served.url) else None,
    )
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title"), "Swagger UI ran and read the schema").to_contain_text(
        "Codemojex"
    )
    expect(page.locator(".opblock").first).to_be_visible()
    assert violations(page) == []
    assert [url for url in outside if not url.startswith("data:")] == []
