"""Pytest fixtures for page tests in real Chromium: a browser, a page that keeps a screenshot,
and a virtual passkey authenticator on that page.

Registered for the whole suite by tests/conftest.py. They are async (Playwright's async API, so
they sit beside the async MCP client in one event loop): use them from `pytest.mark.anyio` tests.
Each test gets its own browser with a fresh profile (launching takes well under a second), so
cookies and passkeys never leak from one test to the next.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import BrowserContext, Page

from tests.support.browser import (
    CHROMIUM_MISSING,
    Screenshots,
    VirtualAuthenticator,
    add_virtual_authenticator,
    chromium_executable,
    launch_chromium,
)
from tests.support.plugin import require

__all__ = [
    "fixture_authenticator",
    "fixture_browser_context",
    "fixture_chromium",
    "fixture_page",
    "fixture_screenshots",
]


@pytest.fixture(scope="session", name="chromium")
def fixture_chromium() -> Path:
    """Debian's chromium, or a skip (a failure under PAYWARDEN_REQUIRE_ALL_TESTS=1) saying how to get it."""
    executable = chromium_executable()
    if executable is None:
        require(CHROMIUM_MISSING)
    return executable


@pytest.fixture(name="screenshots")
def fixture_screenshots(request: pytest.FixtureRequest) -> Screenshots:
    """`await screenshots.take(page, "label")` keeps a PNG named after the test."""
    return Screenshots(test_id=request.node.nodeid)


@pytest.fixture(name="browser_context")
async def fixture_browser_context(chromium: Path, tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """Headless Chromium with a fresh profile; desktop-sized pages (tests may resize to browser.PHONE)."""
    async with launch_chromium(tmp_path / "chromium-profile", executable=chromium) as context:
        yield context


@pytest.fixture(name="page")
async def fixture_page(browser_context: BrowserContext, screenshots: Screenshots) -> AsyncIterator[Page]:
    """The browser's page. Whatever it shows when the test ends is kept as `<test id>-final.png`."""
    page = browser_context.pages[0] if browser_context.pages else await browser_context.new_page()
    yield page
    if not page.is_closed():
        await screenshots.take(page, "final")


@pytest.fixture(name="authenticator")
async def fixture_authenticator(page: Page) -> VirtualAuthenticator:
    """A virtual platform authenticator on `page`: passkey ceremonies there complete by themselves."""
    return await add_virtual_authenticator(page)
