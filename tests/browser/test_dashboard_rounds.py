"""The Dashboard's round control in a real browser: closing a round asks first (and Cancel changes
nothing); "Open a new round" offers the options ``POST /api/operator/rounds`` takes and shows the
server's own words when it refuses them (opening nothing); every open or scheduled round is listed, each
closable after a confirmation."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.support.web import OPERATOR, open_round

pytestmark = pytest.mark.browser


def open_dashboard(page: Page) -> None:
    page.goto(f"/dashboard#operator={OPERATOR}")
    expect(page.get_by_test_id("dashboard")).to_be_visible()


def status_of(operator, round_id: str) -> str:
    status: str = operator.get(f"/api/rounds/{round_id}").json()["status"]
    return status


def round_count(operator) -> int:
    return len(operator.get("/api/rounds?limit=100").json()["rounds"])


def test_closing_a_round_asks_for_confirmation_first(served, operator, page, screenshot):
    round_id = open_round(operator)["round_id"]
    open_dashboard(page)
    expect(page.get_by_test_id("round-id")).to_have_text(round_id)

    page.get_by_test_id("close-round").click()
    dialog = page.get_by_test_id("confirm")
    expect(dialog, "closing asks first").to_be_visible()
    expect(dialog).to_contain_text(round_id)
    expect(dialog).to_contain_text("secret")
    expect(page.get_by_test_id("confirm-no"), "Cancel has the focus: Enter does no harm").to_be_focused()
    screenshot("dashboard-confirm-close")
    page.get_by_test_id("confirm-no").click()
    expect(dialog).to_be_hidden()
    assert status_of(operator, round_id) == "open", "Cancel leaves the round open"

    page.get_by_test_id("close-round").click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog, "Escape cancels too").to_be_hidden()
    assert status_of(operator, round_id) == "open"

    page.get_by_test_id("close-round").click()
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("message")).to_contain_text(f"Closed round {round_id}")
    assert status_of(operator, round_id) == "closed"
    expect(page.get_by_test_id("round-status")).to_have_text("closed")


def test_a_new_round_takes_the_apis_options(served, operator, page, screenshot):
    open_dashboard(page)
    page.get_by_test_id("open-round").click()
    form = page.get_by_test_id("open-form")
    expect(form, "the options form opens").to_be_visible()
    expect(page.get_by_test_id("open-round")).to_have_attribute("aria-expanded", "true")
    for field in ("size", "keyboard", "prices", "delay_s", "duration_s", "max_guesses"):
        expect(
            form.locator(f'[name="{field}"]'), f"the form offers {field}, with a label"
        ).to_have_accessible_name(re.compile(r"\w"))
    form.locator('[name="size"]').fill("12")
    form.locator('[name="prices"]').fill("2 ticket, 15 coin")
    form.locator('[name="duration_s"]').fill("600")
    form.locator('[name="max_guesses"]').fill("5")
    screenshot("dashboard-open-form")
    page.get_by_test_id("open-submit").click()
    message = page.get_by_test_id("message")
    expect(message).to_contain_text("Opened round")
    round_id = re.search(r"RND\w+", message.text_content() or "")
    assert round_id, message.text_content()
    opened = operator.get(f"/api/rounds/{round_id.group(0)}").json()
    assert len(opened["keyboard"]) == 12
    assert opened["prices"] == [{"currency": "ticket", "amount": 2}, {"currency": "coin", "amount": 15}]
    assert opened["max_guesses"] == 5
    assert opened["closes_ms"] - opened["opens_ms"] == 600_000
    expect(form, "the form closes once the round is open").to_be_hidden()


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("size", "99", "size"),  # the server's InvalidOption text
        ("duration_s", "0", "duration_s is a number of seconds"),
        ("max_guesses", "2.5", "max_guesses"),  # a malformed body: the field's own message
        ("prices", "3 ticket, 3 ticket", "each currency once"),
    ],
)
def test_a_refused_option_shows_the_servers_reason_and_opens_nothing(
    served, operator, page, field, value, said
):
    before = round_count(operator)
    open_dashboard(page)
    page.get_by_test_id("open-round").click()
    form = page.get_by_test_id("open-form")
    form.locator(f'[name="{field}"]').fill(value)
    page.get_by_test_id("open-submit").click()
    error = page.get_by_test_id("open-error")
    expect(error, "the server's reason is shown in the form").to_contain_text(said)
    expect(error).to_have_attribute("role", "alert")
    expect(form, "the form stays open to fix the value").to_be_visible()
    expect(form.locator(f'[name="{field}"]'), "the field is marked invalid").to_have_attribute(
        "aria-invalid", "true"
    )
    assert round_count(operator) == before, "a refused option opens no round"


def test_every_open_round_is_listed_and_each_can_be_closed(served, operator, page, screenshot):
    old = open_round(operator)["round_id"]
    done = open_round(operator)["round_id"]
    operator.post(f"/api/operator/rounds/{done}/close")
    later = open_round(operator, delay_s=3600)["round_id"]
    new = open_round(operator)["round_id"]
    open_dashboard(page)

    rows = page.get_by_test_id("open-round-row")
    expect(rows, "every open or scheduled round, not the closed one").to_have_count(3)
    listed = rows.evaluate_all("(rows) => rows.map((row) => row.dataset.round)")
    assert sorted(listed) == sorted([old, later, new]), listed
    expect(page.locator(f'[data-testid="open-round-row"][data-round="{later}"]')).to_contain_text("scheduled")
    screenshot("dashboard-open-rounds")

    row = page.locator(f'[data-testid="open-round-row"][data-round="{old}"]')
    row.get_by_test_id("round-close").click()
    expect(page.get_by_test_id("confirm")).to_contain_text(old)
    page.get_by_test_id("confirm-no").click()
    assert status_of(operator, old) == "open"
    row.get_by_test_id("round-close").click()
    page.get_by_test_id("confirm-yes").click()
    expect(page.get_by_test_id("message")).to_contain_text(f"Closed round {old}")
    expect(rows, "the closed round leaves the list").to_have_count(2)
    assert status_of(operator, old) == "closed"
    assert status_of(operator, new) == "open", "closing one round leaves the others open"
    assert status_of(operator, later) == "scheduled"

    scheduled = page.locator(f'[data-testid="open-round-row"][data-round="{later}"]')
    scheduled.get_by_test_id("round-close").click()
    page.get_by_test_id("confirm-yes").click()
    expect(rows, "a scheduled round can be closed before it opens").to_have_count(1)
    assert status_of(operator, later) == "closed"
