"""The organisation's pages in real Chromium, one browser for the module: an owner with a passkey
disables a member, filters the audit log and saves the Slack webhook; a viewer then sees every
form disabled. Each page is kept as a screenshot at 390 px and at 1280 px, and none is wider than
a phone's screen."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from tests.support.approval_page import enrol_member
from tests.support.browser import DESKTOP, PHONE, Screenshots, VirtualAuthenticator
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member

pytestmark = pytest.mark.anyio
PAGE_TIMEOUT_S = 120
HOOK = "https://hooks.slack.com/services/T000/B000/chromiumABCD"


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


async def _both_sizes(page: Page, screenshots: Screenshots, label: str) -> None:
    """Screenshots at a phone's width and a desktop's; at 390 px nothing scrolls sideways."""
    await page.set_viewport_size(PHONE)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{label} is {width} px wide on a phone"
    await screenshots.take(page, f"{label}-390")
    await page.set_viewport_size(DESKTOP)
    await screenshots.take(page, f"{label}-1280")


async def test_members_audit_and_settings_in_chromium(
    paywarden: RunningServer,
    sqlite_db: Database,
    chromium: Path,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    pages_url = paywarden.settings.pages_url
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="ops-bot")
    make_member(sqlite_db, agent.org_id, role="approver", email="sam@example.com")
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=pages_url, db=sqlite_db, org_id=agent.org_id, clock=paywarden.clock, role="owner"
        )

        await page.get_by_role("link", name="Members").click()
        await expect(page.get_by_role("heading", name="Members", level=1)).to_be_visible()
        await _both_sizes(page, screenshots, "members")
        await page.get_by_role("button", name="Disable sam@example.com").click()
        await expect(page.get_by_role("status")).to_contain_text("The member was disabled")
        await expect(page.get_by_role("button", name="Enable sam@example.com")).to_be_visible()

        await page.get_by_role("link", name="Audit").click()
        await expect(page.locator("#chain-state")).to_contain_text("The log verifies")
        await page.get_by_label("Kind").select_option("member.")
        await page.get_by_role("button", name="Filter").click()
        await expect(page.get_by_text("member.disabled", exact=True)).to_be_visible()
        await _both_sizes(page, screenshots, "audit")

        await page.get_by_role("link", name="Settings").click()
        await page.get_by_label("Incoming webhook URL").fill(HOOK)
        await page.get_by_role("button", name="Save the webhook").click()
        await expect(page.locator("#webhook-masked")).to_have_text("https://hooks.slack.com/…ABCD")
        assert "chromiumAB" not in await page.content()
        await _both_sizes(page, screenshots, "settings")

        await page.get_by_role("button", name="Sign out").click()
        await enrol_member(
            page, pages_url=pages_url, db=sqlite_db, org_id=agent.org_id, clock=paywarden.clock, role="viewer"
        )
        await page.goto(f"{pages_url}/admin/members")
        await expect(page.get_by_role("button", name="Invite")).to_be_disabled()
        await expect(page.get_by_role("button", name="Enable sam@example.com")).to_be_disabled()
        await _both_sizes(page, screenshots, "members-viewer")
        await page.goto(f"{pages_url}/admin/settings")
        await expect(page.get_by_role("button", name="Save the webhook")).to_be_disabled()
        await expect(page.get_by_role("button", name="Remove the webhook")).to_be_disabled()
        await _both_sizes(page, screenshots, "settings-viewer")
