"""A held payment decided on the approval page in real Chromium, on a 390-pixel phone, with a
passkey of Chrome's virtual authenticator: the agent's `fetch_paid` (the official MCP client,
against a real server, a real x402 seller and anvil) is held; the member opens `approvalUrl`,
approves, and the agent's retry with the same idempotency key pays on-chain; or the member
denies, and the retry is `approval_denied` with nothing moved. The server announces each approval
to a local Slack webhook from its background jobs; a slow webhook never delays `fetch_paid`.
Screenshots of every step are kept in the test output."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from tests.e2e.test_approvals import Money
from tests.support.approval_page import DECIDED_BY, enrol_member
from tests.support.browser import PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PAGE_TIMEOUT_S = 90
PREMIUM = 10_000  # 0.01 USDC

_AUDIT = """() => {
  const unlabelled = [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label')).map(el => el.name || el.id);
  const unnamedButtons = [...document.querySelectorAll('button')].filter(b => !b.textContent.trim()).length;
  return {
    lang: document.documentElement.lang,
    h1: document.querySelectorAll('h1').length,
    unlabelled, unnamedButtons,
    overflow: document.documentElement.scrollWidth > window.innerWidth,
    links: [...document.querySelectorAll('main a')].map(a => a.getAttribute('href')),
  };
}"""


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
def server(
    sqlite_db: Database, anvil: Any, test_usdc: TestToken, receiver: WebhookReceiver
) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_SLACK_WEBHOOK_URL": receiver.url,
        "PAYWARDEN_BACKGROUND_JOBS": "1",
    }
    with serve(sqlite_db.url, extra=extra) as running:
        yield running


async def _check_page(page: Page) -> list[str]:
    found = await page.evaluate(_AUDIT)
    assert found["lang"] == "en"
    assert found["h1"] == 1
    assert found["unlabelled"] == []
    assert found["unnamedButtons"] == 0
    assert found["overflow"] is False, "the page scrolls sideways"
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent.trim()") == "Skip to the page's content"
    return list(found["links"])


async def _held(client: Any, url: str) -> dict[str, Any]:
    started = time.monotonic()
    held = structured(await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "1.00"}))
    assert held["status"] == "pending_approval"
    assert held["reason"] == "new_pay_to"
    return {**held, "seconds": time.monotonic() - started}


async def _slack_says(receiver: WebhookReceiver, approval_id: str) -> str:
    for _ in range(150):  # the notifier runs every 5 seconds: wait up to 30
        if any(approval_id in text for text in receiver.texts):
            break
        await anyio.sleep(0.2)
    (text,) = [text for text in receiver.texts if approval_id in text]
    return text


async def test_a_held_payment_approved_on_a_phone_pays_on_chain(
    server: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    receiver: WebhookReceiver,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    setup = make_agent(
        sqlite_db,
        server.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        name="ops-bot",
    )
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    await page.set_viewport_size(PHONE)
    with anyio.fail_after(PAGE_TIMEOUT_S):
        member_id = await enrol_member(
            page, pages_url=server.settings.pages_url, db=sqlite_db, org_id=setup.org_id, clock=server.clock
        )
        async with mcp_client(server.mcp_url, setup.token) as client:
            held = await _held(client, url)
            assert held["approvalUrl"] == f"{server.settings.public_url}/approvals/{held['approvalId']}"
            text = await _slack_says(receiver, held["approvalId"])
            assert "0.01 USD (Base Sepolia, test network) to 127.0.0.1, asked by agent ops-bot." in text
            assert text.endswith(f"Decide on the approval page: {held['approvalUrl']}")

            # The inbox lists it; the link the agent gave opens the page on the pages' host.
            await page.goto(f"{server.settings.pages_url}/admin")
            await expect(page.get_by_role("link", name="1 payment waits for a decision")).to_be_visible()
            await page.get_by_role("navigation", name="Main").get_by_role("link", name="Approvals").click()
            await expect(page.get_by_role("link", name="0.01 USD to 127.0.0.1")).to_be_visible()
            await screenshots.take(page, "inbox")
            await page.goto(held["approvalUrl"])
            await expect(page.get_by_role("heading", level=1)).to_have_text("Approve 0.01 USD to 127.0.0.1?")
            links = await _check_page(page)
            assert links == ["/approvals"]  # nothing from the seller or the agent is a link
            await expect(page.get_by_text("Test network: no real money")).to_be_visible()
            await expect(page.locator("#payee-full")).to_have_text(seller.pay_to)
            await expect(page.get_by_text("Your organisation has never paid this payee.")).to_be_visible()
            await screenshots.take(page, "approval-page")

            await page.get_by_role("button", name="Approve 0.01 USD").click()
            await expect(page.get_by_text("You approved this payment.")).to_be_visible()
            await expect(page.get_by_role("heading", level=1)).to_have_text(
                re.compile(f"^Approved {DECIDED_BY}: the payment will be made when the agent retries$")
            )
            await screenshots.take(page, "approved")

            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
            assert status["status"] == "approved"
            retry = {"url": url, "maxAmountUsd": "1.00", "idempotencyKey": held["idempotencyKey"]}
            paid = structured(await client.call_tool("fetch_paid", retry))
            assert (paid["status"], paid["replayed"], paid["receipt"]["state"]) == ("paid", False, "settled")
            assert paid["receipt"]["txHash"]
            assert money.moved() == PREMIUM
            assert money.signatures("/premium") == 1

    assert member_id
    assert len([text for text in receiver.texts if held["approvalId"] in text]) == 1


async def test_a_denied_payment_moves_nothing_and_a_slow_webhook_delays_nothing(
    server: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    receiver: WebhookReceiver,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    receiver.delay_seconds = 8  # slower than the notifier's 5-second timeout
    setup = make_agent(
        sqlite_db,
        server.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        name="night-bot",
    )
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    await page.set_viewport_size(PHONE)
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=server.settings.pages_url, db=sqlite_db, org_id=setup.org_id, clock=server.clock
        )
        await page.get_by_role("button", name="Sign out").click()
        async with mcp_client(server.mcp_url, setup.token) as client:
            first = await _held(client, url)
            await _slack_says(receiver, first["approvalId"])  # the webhook is now stuck answering
            second = await _held(client, seller.url("/report"))
            assert second["seconds"] < 4, "fetch_paid waited for the webhook"

            # Signed out: the link leads to sign in, then back to the page.
            await page.goto(first["approvalUrl"])
            await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to Paywarden")
            await screenshots.take(page, "sign-in-first")
            await page.get_by_role("button", name="Sign in with a passkey").click()
            await expect(page.get_by_role("heading", level=1)).to_have_text("Approve 0.01 USD to 127.0.0.1?")
            await _check_page(page)

            # A refused passkey decides nothing, and says so where the focus goes.
            await authenticator.set_user_verified(False)
            await page.get_by_role("button", name="Deny").click()
            problem = page.locator("#passkey-error")
            await expect(problem).to_contain_text("Nothing was decided.")
            assert await page.evaluate("document.activeElement.id") == "passkey-error"
            await screenshots.take(page, "refused")
            await authenticator.set_user_verified(True)

            await page.get_by_role("button", name="Deny").click()
            await expect(page.get_by_text("You denied this payment. Nothing will be paid.")).to_be_visible()
            await screenshots.take(page, "denied")
            retry = {"url": url, "maxAmountUsd": "1.00", "idempotencyKey": first["idempotencyKey"]}
            error = error_of(await client.call_tool("fetch_paid", retry))
            assert error["code"] == "approval_denied"
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": first["approvalId"]})
            )
            assert status["status"] == "denied"
    assert money.moved() == 0
    assert money.signatures("/premium") == 0
