"""A session is not a passkey, in real Chromium: a copy of a member's `pw_session` cookie in
another browser, with an authenticator of its own, can neither add a passkey nor decide an
approval; the member's own step-up and add works; and signing out everywhere ends the copy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from playwright.async_api import BrowserContext, Page, expect
from sqlmodel import select

from server.kit.db import Database
from server.models import Approval, MemberPasskey
from tests.support.approval_page import APPROVE, enrol_member
from tests.support.browser import (
    Screenshots,
    VirtualAuthenticator,
    add_virtual_authenticator,
    launch_chromium,
    switch_device_after_step_up,
)
from tests.support.ledger import CENT, facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio

PAGE_TIMEOUT_S = 90


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


def _passkeys(db: Database) -> list[str]:
    with db.read() as session:
        return [row.name for row in session.exec(select(MemberPasskey)).all()]


async def _fetch_status(page: Page, path: str, body: str) -> dict[str, object]:
    """What the server answers a same-origin JSON post from this page (as its scripts would send)."""
    answer: dict[str, object] = await page.evaluate(
        """async ([path, body]) => {
          const csrf = document.querySelector('input[name=csrf]').value;
          const response = await fetch(path, {method: 'POST', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json', 'Accept': 'application/json'},
            body: JSON.stringify({csrf, ...JSON.parse(body)})});
          return {status: response.status, body: await response.json()};
        }""",
        [path, body],
    )
    return answer


async def test_a_copied_session_cookie_can_neither_add_a_passkey_nor_approve(
    paywarden: RunningServer,
    sqlite_db: Database,
    chromium: Path,
    tmp_path: Path,
    page: Page,
    browser_context: BrowserContext,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    pages_url = paywarden.settings.pages_url
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="ops-bot")
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=pages_url, db=sqlite_db, org_id=agent.org_id, clock=paywarden.clock, role="owner"
        )
        held = reserve_now(
            sqlite_db, agent.agent_id, facts("stolen-1", amount=50 * CENT), paywarden.clock.now()
        )
        assert held.approval is not None
        approval_id = held.approval.id
        stolen = [cookie for cookie in await browser_context.cookies() if cookie["name"] == "pw_session"]
        assert len(stolen) == 1

        async with launch_chromium(tmp_path / "thief-profile", executable=chromium) as thief_context:
            thief = thief_context.pages[0] if thief_context.pages else await thief_context.new_page()
            thief_authenticator = await add_virtual_authenticator(thief)
            await thief_context.add_cookies(stolen)  # type: ignore[arg-type]

            await thief.goto(f"{pages_url}/account/passkeys")
            await expect(thief.get_by_role("heading", level=1)).to_have_text("Your passkeys")
            await thief.get_by_label("Name the new passkey").fill("Thief's key")
            await thief.get_by_role("button", name="Add a passkey").click()
            await expect(thief.locator("#passkey-error")).to_be_visible()
            await screenshots.take(thief, "copied-cookie-add-refused")
            assert await thief_authenticator.credentials() == []
            # Straight to the registration, without the step-up the page's script runs first.
            skipped = await _fetch_status(thief, "/account/passkeys/options", "{}")
            assert skipped["status"] == 403
            assert skipped["body"] == {
                "error": "step_up_required",
                "message": (
                    "Adding a passkey needs a fresh check with one of your passkeys, and that check "
                    "was missing, already used or too old. Start again from your passkeys page."
                ),
            }
            assert _passkeys(sqlite_db) == ["Passkey added " + paywarden.clock.now().strftime("%Y-%m-%d")]

            await thief.goto(f"{pages_url}/approvals/{approval_id}")
            await thief.get_by_role("button", name=APPROVE).click()
            await expect(thief.locator("#passkey-error")).to_be_visible()
            await screenshots.take(thief, "copied-cookie-approve-refused")
            with sqlite_db.read() as session:
                row = session.get(Approval, approval_id)
                assert row is not None
                assert row.status == "pending"

            # The member's own step-up, then a new passkey on a second device.
            await page.goto(f"{pages_url}/account/passkeys")
            await switch_device_after_step_up(page, authenticator)
            await page.get_by_label("Name the new passkey").fill("Phone")
            await page.get_by_role("button", name="Add a passkey").click()
            await expect(page.get_by_text("Your new passkey is ready.")).to_be_visible()
            await screenshots.take(page, "owner-added-a-passkey")
            assert len(_passkeys(sqlite_db)) == 2

            # Signing out everywhere ends the copy as well.
            await page.get_by_role("button", name="Sign out everywhere").click()
            await expect(page.get_by_role("status").filter(has_text="every device")).to_have_text(
                "You are signed out on every device."
            )
            await thief.goto(f"{pages_url}/account/passkeys")
            await expect(thief.get_by_role("heading", level=1)).to_have_text("Sign in to Paywarden")
            await screenshots.take(thief, "copied-cookie-signed-out")
