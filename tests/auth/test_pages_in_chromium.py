"""The members' pages in real Chromium, on a desktop and a 390-pixel phone: enrolment, sign-in,
passkeys (add, rename, remove), connections (revoke), and errors shown as sentences that take the
focus. Every page is checked for a language, one heading, a label on every control and a skip
link first in the focus order; each test keeps screenshots."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from tests.support.browser import (
    PHONE,
    Screenshots,
    VirtualAuthenticator,
    check_page,
    switch_device_after_step_up,
)
from tests.support.oauth import CALLBACK, authorization_params, enrollment_link_token, pkce, register
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member

pytestmark = pytest.mark.anyio

PAGE_TIMEOUT_S = 60


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


async def _enrol(page: Page, server: RunningServer, db: Database, screenshots: Screenshots) -> str:
    agent = make_agent(db, server.settings, allow_hosts=[], name="ops-bot")
    member_id = make_member(db, agent.org_id, role="owner")
    token = enrollment_link_token(db, member_id, agent.org_id, clock=server.clock)
    await page.goto(f"{server.settings.pages_url}/enroll/{token}")
    await check_page(page)
    await screenshots.take(page, "enrol")
    await page.get_by_label("Name this passkey").fill("Work laptop")
    await page.get_by_role("button", name="Create a passkey").click()
    await page.wait_for_url("**/admin?welcome=1")
    return agent.agent_id


async def test_enrolment_sign_in_and_passkeys_on_a_phone(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    await page.set_viewport_size(PHONE)
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await _enrol(page, paywarden, sqlite_db, screenshots)
        await check_page(page)
        await screenshots.take(page, "home")

        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("status").filter(has_text="signed out")).to_have_text(
            "You are signed out."
        )
        await check_page(page)
        await screenshots.take(page, "signed-out")
        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.wait_for_url("**/admin")

        await page.get_by_role("link", name="Passkeys", exact=True).click()
        await check_page(page)
        await expect(page.get_by_text("This is your only passkey, so it cannot be removed.")).to_be_visible()
        # Adding a passkey first confirms the person with the passkey they have; then a second
        # device creates the new one (this authenticator forgets its passkey once the step-up
        # is answered, so it may create another).
        await switch_device_after_step_up(page, authenticator)
        await page.get_by_label("Name the new passkey").fill("Phone")
        await page.get_by_role("button", name="Add a passkey").click()
        await expect(page.get_by_text("Your new passkey is ready.")).to_be_visible()
        await screenshots.take(page, "two-passkeys")

        await page.get_by_label("New name for Work laptop").fill("Old laptop")
        await page.get_by_role("button", name="Rename").first.click()
        await expect(page.get_by_text("The passkey was renamed.")).to_be_visible()
        await expect(page.get_by_role("button", name="Remove Phone")).to_have_count(1)
        # This browser signed in with the laptop's passkey: removing it ends this session too.
        await page.get_by_role("button", name="Remove Old laptop").click()
        await expect(page.get_by_role("status").filter(has_text="removed")).to_have_text(
            "The passkey was removed. You had signed in with it here, so you are signed out: "
            "sign in with another of your passkeys."
        )
        await screenshots.take(page, "one-passkey-left")

        # The passkey left signs in; a refused ceremony shows a sentence and takes the focus.
        await authenticator.set_user_verified(False)
        await page.get_by_role("button", name="Sign in with a passkey").click()
        problem = page.locator("#passkey-error")
        await expect(problem).to_have_text(
            "The passkey request was cancelled or timed out. Try again when you are ready."
        )
        assert await page.evaluate("document.activeElement.id") == "passkey-error"
        await screenshots.take(page, "sign-in-refused")
        await authenticator.set_user_verified(True)
        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.wait_for_url("**/admin")


async def test_consent_errors_and_connections_in_the_browser(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await _enrol(page, paywarden, sqlite_db, screenshots)
        client = await anyio.to_thread.run_sync(lambda: register(paywarden, client_name="Desk Agent"))
        query = "&".join(f"{k}={v}" for k, v in authorization_params(client["client_id"], pkce()))
        await page.goto(f"{paywarden.settings.pages_url}/oauth/authorize?{query}")
        await check_page(page)
        for box in await page.get_by_role("checkbox").all():
            await box.uncheck()
        await page.get_by_role("button", name="Allow").click()
        error = page.get_by_role("alert")
        await expect(error).to_have_text(
            "Choose at least one permission to give the application, or choose Deny."
        )
        assert await page.evaluate("document.activeElement.id") == "error"
        await screenshots.take(page, "consent-error")

        async def at_callback(route: object) -> None:
            await route.fulfill(status=200, body="back at the client")  # type: ignore[attr-defined]

        await page.route(f"{CALLBACK}*", at_callback)
        await page.get_by_label("Pay for URLs within the agent's spending policy").check()
        await page.get_by_role("button", name="Allow").click()
        await page.wait_for_url(f"{CALLBACK}?**")

        await page.goto(f"{paywarden.settings.pages_url}/connections")
        await check_page(page)
        await expect(page.get_by_role("heading", name="Desk Agent")).to_be_visible()
        await page.set_viewport_size(PHONE)
        await screenshots.take(page, "connections-phone")
        await page.get_by_role("link", name="Revoke Desk Agent").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("Revoke Desk Agent?")  # it asks once
        await check_page(page)
        await page.get_by_role("button", name="Revoke Desk Agent").click()
        await expect(
            page.get_by_text("The connection was revoked: its tokens no longer work.")
        ).to_be_visible()
        await expect(page.get_by_text("No application is connected yet.")).to_be_visible()

        await page.goto(
            f"{paywarden.settings.pages_url}/oauth/authorize?client_id=pwc_unknown&response_type=code"
        )
        await expect(page.get_by_role("alert")).to_contain_text("Paywarden does not know the application")
        await screenshots.take(page, "unknown-client")
