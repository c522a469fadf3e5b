"""The Dashboard in a real browser: the operator token from the URL fragment, the jobs per state, the
throughput chart, and a real dead letter (made on the real bus) that the operator retries from its row.
No worker runs here, so the retried job stays queued."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from echomq import ids
from tests.support.web import OPERATOR, dead_letter, open_round

pytestmark = pytest.mark.browser

DEAD_JOB = ids.mint("JOB")  # fresh: an id minted over 24 h ago is refused (echomq.ids)


def depth(page, state):
    return page.locator(f'[data-testid="depth"][data-state="{state}"]')


def expect_depths(page, **expected):
    for state, count in expected.items():
        expect(depth(page, state), f"the {state} count").to_have_text(str(count))


def test_the_operator_sees_the_queue_and_retries_a_dead_letter(
    served, operator, join, redis_server, tag, run_in_thread, page, screenshot
):
    the_round = open_round(operator)
    player_id, _ = join("Ada")

    run_in_thread(  # a guess the worker gave up on
        dead_letter(
            redis_server.url, tag, the_round["round_id"], player_id, DEAD_JOB, "boom: the handler gave up"
        )
    )

    page.goto(f"/dashboard#operator={OPERATOR}")
    expect(page.get_by_test_id("dashboard"), "the token in the fragment opens the dashboard").to_be_visible()
    expect(page.get_by_test_id("operator-form")).to_be_hidden()
    expect(page, "the token is taken out of the address bar").not_to_have_url(re.compile("operator="))
    expect(page.get_by_test_id("round-id")).to_have_text(the_round["round_id"])
    expect(page.get_by_test_id("round-status")).to_have_text("open")
    expect_depths(page, queued=0, delayed=0, active=0, done=0, dead=1)

    row = page.locator(f'[data-testid="dead-row"][data-job="{DEAD_JOB}"]')
    expect(row, "the dead letter has a row").to_be_visible()
    expect(page.get_by_test_id("dead-row")).to_have_count(1)
    expect(row).to_contain_text("boom: the handler gave up")
    expect(row.locator("td").nth(3), "tries").to_have_text("1")
    expect(page.get_by_test_id("dead-summary")).to_have_text("1")

    chart = page.get_by_test_id("throughput")
    expect(chart, "the throughput chart").to_be_visible()
    assert chart.evaluate("node => node.namespaceURI") == "http://www.w3.org/2000/svg", "the chart is an SVG"
    expect(chart.locator("line.axis").first, "the chart has axes").to_be_attached()
    expect(chart.locator("polyline.admitted"), "the host's samples are drawn").to_have_count(1)
    expect(chart.locator("polyline.completed")).to_have_count(1)
    expect(page.get_by_test_id("throughput-rate")).to_contain_text("completed/s")
    screenshot("dashboard-dead-letter")

    row.get_by_test_id("dead-retry").click()
    expect(page.get_by_test_id("message")).to_have_text(f"{DEAD_JOB} retried: it is back on its lane.")
    expect(page.get_by_test_id("dead-row"), "the retried job leaves the dead letters").to_have_count(0)
    expect_depths(page, queued=1, dead=0, active=0)
    lane = page.locator(f'[data-testid="lane-row"][data-lane="{player_id}"]')
    expect(lane, "the job waits on its player's lane again").to_be_visible()
    expect(lane.locator("td").nth(1)).to_have_text("1")

    assert operator.get("/api/operator/dead").json()["dead"] == []
    assert operator.get("/api/operator/stats").json()["depth"]["queued"] == 1
