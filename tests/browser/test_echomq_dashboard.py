"""EchoMQ's own dashboard (``echomq dashboard``, no game) in headless Chromium on a real Redis: the
numbers of a queue the test made, a retry and a delete clicked on dead letters and their effect in Redis,
the page refreshing itself, the read-only mode, and an axe-core audit with no serious violation."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import redis
from playwright.sync_api import Page, expect

from echomq import Bus, ids
from tests.browser.conftest import open_page
from tests.browser.test_accessibility import audit
from tests.support.dashboard import ServedDashboard

pytestmark = pytest.mark.browser


@pytest.fixture
def board(redis_server, tag) -> Iterator[ServedDashboard]:
    served = ServedDashboard(redis_server.url, tag, refresh_s=0.5).start()
    yield served
    served.stop()


async def _make_queue(url: str, tag: str) -> dict[str, str]:
    """Three queued jobs on two lanes, one active under a lease, two dead letters."""
    async with Bus.from_url(url, tag=tag) as bus:
        made = {}
        for name in ("retry-me", "delete-me"):
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="dead-lane", payload=b"", max_attempts=1)
            [claim] = await bus.claim()
            await bus.fail(claim, f"{name}: the handler raised")
            made[name] = job
        for lane in ("A", "A", "B", "C"):
            await bus.enqueue(ids.mint("JOB"), lane=lane, payload=b"")
        [claim] = await bus.claim(lease_ms=120_000, owner="worker-1")
        made["leased"] = claim.job
        return made


async def _enqueue(url: str, tag: str) -> None:
    async with Bus.from_url(url, tag=tag) as bus:
        await bus.enqueue(ids.mint("JOB"), lane="late", payload=b"")


def depth(page: Page, state: str):
    return page.locator(f'[data-testid="depth"][data-state="{state}"]')


def dead_row(page: Page, job: str):
    return page.locator(f'[data-testid="dead-row"][data-job="{job}"]')


def test_the_operator_sees_the_queue_retries_and_deletes(
    browser, board, redis_server, tag, run_in_thread, request, screenshot
):
    """The page shows the depths, the lease and both dead letters with their errors; Retry puts one back
    in its lane, Delete (confirmed) removes the other, each said on the page and seen in Redis; a job
    enqueued meanwhile shows up without a reload."""
    made = run_in_thread(_make_queue(redis_server.url, tag))
    client = redis.Redis.from_url(redis_server.url)
    keys = Bus.from_url(redis_server.url, tag=tag).keys  # key names only; never connects
    try:
        for page in open_page(browser, board, request):
            page.goto("/")
            expect(page.get_by_role("heading", level=1)).to_contain_text("EchoMQ queue")
            for state, count in (("queued", 3), ("active", 1), ("dead", 2), ("done", 0)):
                expect(depth(page, state), f"the {state} count").to_have_text(str(count))
            expect(page.locator(f'[data-testid="lease-row"][data-job="{made["leased"]}"]')).to_contain_text(
                "worker-1"
            )
            expect(page.locator('[data-testid="lease-left"]')).to_have_text(re.compile(r"\(in \d+\.\d s\)"))
            expect(dead_row(page, made["retry-me"]).get_by_test_id("dead-error")).to_have_text(
                "retry-me: the handler raised"
            )
            screenshot("echomq-dashboard")

            dead_row(page, made["retry-me"]).get_by_role("button", name=f"Retry {made['retry-me']}").click()
            expect(page.get_by_test_id("message")).to_have_text(f"{made['retry-me']} is back in its lane.")
            assert client.zscore(keys.lane("dead-lane"), made["retry-me"]) is not None
            expect(depth(page, "dead")).to_have_text("1")

            page.once("dialog", lambda dialog: dialog.accept())
            dead_row(page, made["delete-me"]).get_by_role(
                "button", name=f"Delete {made['delete-me']}"
            ).click()
            expect(page.get_by_test_id("message")).to_have_text(f"{made['delete-me']} was deleted.")
            assert client.zcard(keys.dead) == 0
            assert client.exists(keys.job(made["delete-me"])) == 0
            expect(depth(page, "dead")).to_have_text("0")
            expect(page.get_by_text("No dead letters.")).to_be_visible()

            run_in_thread(_enqueue(redis_server.url, tag))
            expect(depth(page, "queued"), "refreshed in place").to_have_text("5")  # 3 + the retried + late
    finally:
        client.close()


def test_a_dismissed_delete_changes_nothing(browser, board, redis_server, tag, run_in_thread, request):
    """Cancelling the confirmation of a delete posts nothing: the dead letter stays."""
    made = run_in_thread(_make_queue(redis_server.url, tag))
    client = redis.Redis.from_url(redis_server.url)
    keys = Bus.from_url(redis_server.url, tag=tag).keys
    try:
        for page in open_page(browser, board, request):
            page.goto("/")
            page.once("dialog", lambda dialog: dialog.dismiss())
            dead_row(page, made["delete-me"]).get_by_role(
                "button", name=f"Delete {made['delete-me']}"
            ).click()
            expect(page.get_by_test_id("message")).to_be_hidden()
            assert client.zcard(keys.dead) == 2
    finally:
        client.close()


def test_the_read_only_page_has_no_actions(browser, redis_server, tag, run_in_thread, request):
    """With read_only the dead letters are listed without Retry or Delete buttons."""
    made = run_in_thread(_make_queue(redis_server.url, tag))
    served = ServedDashboard(redis_server.url, tag, read_only=True).start()
    try:
        for page in open_page(browser, served, request):
            page.goto("/")
            expect(page.get_by_test_id("read-only")).to_be_visible()
            expect(dead_row(page, made["retry-me"])).to_be_visible()
            expect(page.get_by_role("button")).to_have_count(0)
    finally:
        served.stop()


def test_the_dashboard_passes_an_axe_audit(browser, board, redis_server, tag, run_in_thread, request):
    """axe-core finds no serious or critical violation on a full dashboard (every table shown)."""
    run_in_thread(_make_queue(redis_server.url, tag))
    for page in open_page(browser, board, request, bypass_csp=True):  # axe is injected inline
        page.goto("/")
        expect(depth(page, "dead")).to_have_text("2")
        audit(page, "the echomq dashboard")
