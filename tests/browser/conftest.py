"""The browser fixtures: the system's headless Chromium (``/usr/bin/chromium``, never a downloaded one)
driven through Playwright's sync API against the real app of ``served``.

* ``browser`` (package): one Chromium for the tests of this folder. Without ``/usr/bin/chromium`` they
  are skipped, unless ``CODEMOJEX_REQUIRE_BROWSER=1`` (as CI sets it), which makes that a failure.
* ``page`` (function): a page in a fresh browser context (its own storage, so its own player session),
  pointed at ``served.url``. A JavaScript exception on the page (``pageerror``) or a console error other
  than the browser's "Failed to load resource ... 4xx" line fails the test that caused it.
* ``screenshot``: saves a full-page PNG into ``$CODEMOJEX_ARTIFACTS``, else ``test-artifacts/screenshots/``;
  a failed browser test leaves ``<test name>-failed.png`` there too.

Playwright's sync API runs its event loop in a greenlet of the test's thread and keeps that loop marked
as the thread's running loop while it is started, so ``asyncio.run()`` cannot start on that thread. So
Playwright lives for this folder only (package scope: stopped before the async tests of the other folders
run), and the ``run_in_thread`` fixture runs a setup coroutine beside it.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from playwright.sync_api import Browser, Error, Page, expect, sync_playwright

from tests.support.web import ROOT, run

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REQUIRE_ENV = "CODEMOJEX_REQUIRE_BROWSER"
ARTIFACTS_ENV = "CODEMOJEX_ARTIFACTS"
TIMEOUT_MS = 20_000
VIEWPORT = {"width": 1280, "height": 900}

# What the browser logs for a response of status 4xx: the pages show those refusals themselves.
EXPECTED_CONSOLE_ERROR = re.compile(
    r"^Failed to load resource: the server responded with a status of 4\d\d\b"
)


@dataclasses.dataclass
class Console:
    """What one page said on its console, and the part of it that fails the test."""

    lines: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def on_console(self, message: Any) -> None:
        where = message.location or {}
        line = (
            f"console.{message.type}: {message.text} ({where.get('url', '?')}:{where.get('lineNumber', '?')})"
        )
        self.lines.append(line)
        if message.type == "error" and not EXPECTED_CONSOLE_ERROR.match(message.text):
            self.problems.append(line)

    def on_pageerror(self, error: Any) -> None:
        line = f"pageerror (an uncaught JavaScript exception): {error.stack or error}"
        self.lines.append(line)
        self.problems.append(line)


CONSOLE = pytest.StashKey[Console]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a browser test whose page threw or logged an error; show the console of a failed one."""
    try:
        result = yield
    except BaseException:
        console = item.stash.get(CONSOLE, None)
        if console is not None and console.lines:
            item.add_report_section("call", "browser console", "\n".join(console.lines))
        _save_failure_screenshot(item)
        raise
    console = item.stash.get(CONSOLE, None)
    if console is not None and console.problems:
        pytest.fail(
            "the page reported errors while the test ran:\n  " + "\n  ".join(console.problems), pytrace=False
        )
    return result


def _save_failure_screenshot(item: pytest.Item) -> None:
    """The page as it was when the test failed, among the artifacts as ``<test name>-failed.png``."""
    page = getattr(item, "funcargs", {}).get("page")
    if page is None or page.is_closed():
        return
    path = artifacts_dir() / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', item.name)}-failed.png"
    try:
        page.screenshot(path=str(path), full_page=True)
    except Error as exc:
        item.add_report_section("call", "failure screenshot", f"not saved: {exc}")
    else:
        item.add_report_section("call", "failure screenshot", str(path))


def _missing_browser(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 requires the browser tests to run", pytrace=False)
    print(f"browser tests skipped: {reason} (set {REQUIRE_ENV}=1 to make this a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """The system's headless Chromium, launched once for this folder (Playwright downloads nothing)."""
    if not Path(CHROMIUM).exists():
        _missing_browser(f"no Chromium at {CHROMIUM}")
    expect.set_options(timeout=TIMEOUT_MS)
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    except BaseException:
        playwright.stop()
        raise
    yield chromium
    try:
        chromium.close()
    finally:
        playwright.stop()


def open_page(
    browser: Browser, served: Any, request: pytest.FixtureRequest, **options: Any
) -> Iterator[Page]:
    """A page of a fresh context on the served app whose console errors and page errors fail the test
    (:class:`Console`); ``options`` go to the context (``bypass_csp`` for the axe audit)."""
    context = browser.new_context(viewport=VIEWPORT, base_url=served.url, locale="en-US", **options)
    context.set_default_timeout(TIMEOUT_MS)
    console = Console()
    request.node.stash[CONSOLE] = console
    the_page = context.new_page()
    the_page.on("console", console.on_console)
    the_page.on("pageerror", console.on_pageerror)
    yield the_page
    context.close()


@pytest.fixture
def page(browser: Browser, served: Any, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page of a fresh context (no stored player or operator token) on the served app."""
    yield from open_page(browser, served, request)


def artifacts_dir() -> Path:
    """``$CODEMOJEX_ARTIFACTS`` if set, else ``<repo>/test-artifacts/screenshots`` (created)."""
    folder = Path(os.environ.get(ARTIFACTS_ENV) or ROOT / "test-artifacts" / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def screenshot(page: Page) -> Callable[[str], Path]:
    """``screenshot("play-solved")`` saves the whole page as ``play-solved.png`` among the artifacts."""

    def save(name: str) -> Path:
        path = artifacts_dir() / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path

    return save


@pytest.fixture
def run_in_thread() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """:func:`tests.support.web.run` on a thread of its own: on the test's thread Playwright's loop is
    marked running, and ``asyncio.run`` refuses to start there."""

    def run_beside_playwright(coroutine: Coroutine[Any, Any, Any]) -> Any:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="setup") as pool:
            return pool.submit(run, coroutine).result(timeout=60)

    return run_beside_playwright
