"""The confirmation page of a change an admin token asked for, and the sudo page, in real Chromium
with a virtual authenticator: an owner reads the change in words, confirms it with a passkey and
the change is made; a new token is shown once; sudo returns to where it was asked for.
Screenshots at 390 px and 1280 px are kept in the test output."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, expect

from auth.scopes import Scope
from auth.tokens import find_by_secret
from server.kit.db import Database
from tests.support.admin_api import admin_token, call
from tests.support.approval_page import enrol_member
from tests.support.browser import DESKTOP, PHONE, Screenshots, VirtualAuthenticator
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio

PAGE_TIMEOUT_S = 90


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


async def _both_sizes(page: Page, screenshots: Screenshots, label: str) -> None:
    await page.set_viewport_size(PHONE)
    await screenshots.take(page, f"{label}-390")
    await page.set_viewport_size(DESKTOP)
    await screenshots.take(page, f"{label}-1280")


async def test_an_owner_confirms_a_raised_cap_and_a_new_token_with_a_passkey(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    pages_url = paywarden.settings.pages_url
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="ops-bot")
    writer = admin_token(sqlite_db, paywarden, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    policy_path = f"/agents/{agent.agent_id}/policy"
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=pages_url, db=sqlite_db, org_id=agent.org_id, clock=paywarden.clock, role="owner"
        )
        asked = call(paywarden, "patch", policy_path, writer, body={"dailyCapUsd": "40.00"})
        assert asked.status_code == 202, asked.text
        await page.set_viewport_size(PHONE)
        await page.goto(asked.json()["confirmationUrl"])
        await expect(page.get_by_role("heading", level=1)).to_have_text("Change what agent ops-bot may pay?")
        await expect(page.get_by_text("Most per day: 40.00 USD")).to_be_visible()
        await _both_sizes(page, screenshots, "policy-change")
        await page.get_by_role("button", name="Confirm with a passkey").click()
        await page.wait_for_url("**?done=confirmed")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Change confirmed")
        await _both_sizes(page, screenshots, "policy-change-confirmed")
        assert call(paywarden, "get", policy_path, writer).json()["policy"]["dailyCapUsd"] == "40.00"

        issued = call(
            paywarden, "post", f"/agents/{agent.agent_id}/tokens", writer, body={"scopes": ["payments:read"]}
        )
        assert issued.status_code == 202, issued.text
        await page.goto(issued.json()["confirmationUrl"])
        await expect(page.get_by_role("heading", level=1)).to_have_text(
            "Issue a new token for agent ops-bot?"
        )
        await _both_sizes(page, screenshots, "token-change")
        await page.get_by_role("button", name="Confirm with a passkey").click()
        await page.wait_for_url("**?done=confirmed")
        secret = await page.locator("code.secret").inner_text()
        assert secret.startswith("pw_at_")
        await _both_sizes(page, screenshots, "token-shown-once")
        await page.reload()
        await expect(page.locator("code.secret")).to_have_count(0)
        with sqlite_db.read() as session:
            stored = find_by_secret(session, secret)
        assert stored is not None
        assert (stored.agent_id, stored.audience) == (agent.agent_id, paywarden.settings.mcp_url)


async def test_sudo_asks_for_the_passkey_and_returns(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    pages_url = paywarden.settings.pages_url
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="ops-bot")
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=pages_url, db=sqlite_db, org_id=agent.org_id, clock=paywarden.clock, role="owner"
        )
        await page.goto(f"{pages_url}/account/sudo?next=/approvals")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Confirm it is you")
        await _both_sizes(page, screenshots, "sudo")
        await page.get_by_role("button", name="Confirm with a passkey").click()
        await page.wait_for_url(f"{pages_url}/approvals")
        await page.goto(f"{pages_url}/account/sudo?next=/approvals")
        await expect(page.get_by_text("You confirmed recently")).to_be_visible()
        await _both_sizes(page, screenshots, "sudo-fresh")
