"""The economy on the Play page in a real browser: the rule is shown before the player types, a broke
player's submit button says so (disabled, labelled) instead of a refusal after six emoji, and the next
round's first guess refills them by the rule. A game with an allowance of 2 tickets (2 guesses a
round) keeps the test short; the rounds are opened and closed through the operator API."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.web import open_round, with_settings

pytestmark = pytest.mark.browser

ALLOWANCE = (("ticket", 2),)
GUESS = ("🍍", "🍍", "🍍", "🥥", "🥥", "🥥")


@pytest.fixture
def host_config(host_config):
    """Two tickets a round, no coins (a guess costs a ticket or 5 coins), 10 coins for a solve."""
    return with_settings(host_config, allowance=ALLOWANCE, solve_reward=(("coin", 10),))


def type_guess(page, guess):
    for key in guess:
        page.get_by_test_id("keyboard").locator(f'[data-testid="key"][data-key="{key}"]').click()


def balance(page, currency):
    return page.locator(f'[data-testid="balance"][data-currency="{currency}"]')


def test_a_broke_player_sees_the_rule_and_is_refilled_by_the_next_round(served, operator, page, screenshot):
    """Join: the allowance to come is shown; two guesses spend it; the button says the player is out of
    funds before they type; the next round's first guess tops them up and is admitted."""
    first = open_round(operator)
    page.goto("/")
    page.get_by_test_id("name").fill("Penny")
    page.get_by_test_id("join").click()
    economy = page.get_by_test_id("economy")
    expect(economy, "the rule before the first guess").to_have_text(
        "Your first guess of this round tops you up to 2 tickets (+2 tickets)."
        " Solving the round earns 10 coins."
    )
    expect(page.get_by_test_id("price")).to_have_text("next guess: 1 ticket")
    submit = page.get_by_test_id("submit")
    for spent in (1, 2):
        type_guess(page, GUESS)
        expect(submit).to_be_enabled()
        submit.click()
        expect(page.get_by_test_id("message")).to_contain_text("Admitted, charged 1 ticket")
        expect(balance(page, "ticket")).to_have_text(str(2 - spent))
    expect(economy, "broke: the rule says how to get more").to_contain_text(
        "Out of tickets for this round. Your first guess of the next round tops you up to 2 tickets."
    )
    expect(economy).to_have_attribute("data-broke", "1")
    expect(page.get_by_test_id("price")).to_have_text("you cannot pay for another guess this round")
    expect(submit, "said on the button before any typing").to_have_text("Out of funds until the next round")
    type_guess(page, GUESS)
    expect(submit, "six emoji typed: still no refusal to be had").to_be_disabled()
    screenshot("economy-broke")
    page.set_viewport_size({"width": 375, "height": 800})
    screenshot("economy-broke-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    assert operator.post(f"/api/operator/rounds/{first['round_id']}/close").status_code == 200
    second = open_round(operator)
    next_round = page.get_by_test_id("next-round")
    expect(next_round, "the closed round offers the new one").to_be_visible(timeout=15_000)
    next_round.click()
    expect(page.get_by_test_id("round-id")).to_have_text(second["round_id"])
    expect(economy, "the new round's allowance is shown").to_contain_text(
        "Your first guess of this round tops you up to 2 tickets (+2 tickets)."
    )
    expect(economy).to_have_attribute("data-broke", "0")
    type_guess(page, GUESS)
    expect(submit).to_have_text("Submit guess")
    submit.click()
    expect(page.get_by_test_id("message")).to_contain_text("Admitted, charged 1 ticket")
    expect(balance(page, "ticket"), "refilled to 2 by the rule, less the guess").to_have_text("1")
    expect(economy).to_have_text(
        "Every round, your first guess tops you up to 2 tickets. Solving the round earns 10 coins."
    )
    screenshot("economy-refilled")
