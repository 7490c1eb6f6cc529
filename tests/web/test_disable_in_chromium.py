"""Disabling an agent on the dashboard, in real Chromium (one browser for the module): an owner
signed in with a passkey disables an agent while its `fetch_paid` waits for approval; the waiting
call ends at once with `agent_disabled` and the agent's next call is refused, with its token and
with the token of the OAuth connection a colleague made for it. A viewer then sees
the agent page's forms disabled. The approvals inbox, the connections page and the agent page,
disabled and as a viewer sees it, are kept as screenshots at 390 px and 1280 px, none wider than
a phone's screen (the other pages' are kept by test_dashboard_in_chromium.py,
test_organisation_pages_in_chromium.py and test_change_page_in_chromium.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from server.models import Approval
from tests.support.approval_page import enrol_member
from tests.support.browser import DESKTOP, PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import Anvil, TestToken
from tests.support.elicitation import (
    LEGACY,
    UrlElicitations,
    approval_id_of,
    call_while_deciding,
    eliciting_client,
)
from tests.support.fixtures_chain import FundedWallet
from tests.support.oauth import (
    authorization_params,
    call_tool,
    code_of,
    enrolled_person,
    exchange,
    pkce,
    register,
)
from tests.support.paywarden import RunningServer, chain_environ, error_of, serve
from tests.support.seller import Seller
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PAGE_TIMEOUT_S = 120
WAIT_MS = 60_000  # the call's own limit: the test fails long before it if disabling did not end it
POLL_MS = 200


@pytest.fixture
def paywarden(sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": str(WAIT_MS),
        "PAYWARDEN_APPROVAL_POLL_MS": str(POLL_MS),
    }
    with serve(sqlite_db.url, public_host="localhost", extra=extra) as running:
        yield running


async def _both_sizes(page: Page, screenshots: Screenshots, label: str) -> None:
    """Screenshots at a phone's width and a desktop's; at 390 px nothing scrolls sideways."""
    await page.set_viewport_size(PHONE)
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{label} is {width} px wide on a phone"
    await screenshots.take(page, f"{label}-390")
    await page.set_viewport_size(DESKTOP)
    await screenshots.take(page, f"{label}-1280")


def _connect_a_notebook(server: RunningServer, db: Database, org_id: str, agent_id: str) -> str:
    """A colleague connects an MCP client ("Field notebook") to the agent with OAuth; returns the
    access token the client was given."""
    colleague = enrolled_person(server, db, org_id=org_id)
    try:
        client = register(server, client_name="Field notebook")
        challenge = pkce()
        consent = colleague.browser.authorize(authorization_params(client["client_id"], challenge))
        assert consent.status_code == 200, consent.text[:500]
        code = code_of(colleague.browser.consent(consent, agent=agent_id))
        answer = exchange(server, client["client_id"], code, challenge.verifier)
        assert answer.status_code == 200, answer.text
        token = answer.json()["access_token"]
        assert isinstance(token, str)
        return token
    finally:
        colleague.browser.close()


def _status(db: Database, approval_id: str) -> str:
    with db.read() as session:
        approval = session.get(Approval, approval_id)
        assert approval is not None
        return str(approval.status)


async def test_an_owner_disables_an_agent_whose_call_waits_and_a_viewer_changes_nothing(
    paywarden: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    funded_wallet: FundedWallet,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    del authenticator  # present on the page: the passkeys are made there
    site = paywarden.settings.pages_url
    # Its first payment to this seller is held: the organisation never paid the payee.
    setup = make_agent(
        sqlite_db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        name="field-bot",
    )
    agent_page = f"{site}/admin/agents/{setup.agent_id}"
    signed_before = seller.payment_signatures("/premium")  # the seller serves the whole session
    granted = await anyio.to_thread.run_sync(
        _connect_a_notebook, paywarden, sqlite_db, setup.org_id, setup.agent_id
    )
    elicitations = UrlElicitations("accept")
    disabled_at: list[float] = []

    async def disable_on_the_dashboard(_: object) -> None:
        # The owner, told of the waiting payment, finds it in the inbox, then disables the agent.
        await page.goto(f"{site}/approvals")
        await expect(page.get_by_role("link", name="0.01 USD to 127.0.0.1")).to_be_visible()
        await _both_sizes(page, screenshots, "approvals-inbox")
        await page.goto(f"{site}/connections")
        await expect(page.get_by_role("heading", name="Connections", level=1)).to_be_visible()
        await expect(page.get_by_role("heading", name="Field notebook")).to_be_visible()
        await _both_sizes(page, screenshots, "connections")
        await page.goto(agent_page)
        disabled_at.append(time.monotonic())
        await page.get_by_role("button", name="Disable field-bot").click()
        await expect(page.get_by_role("status")).to_have_text(
            "The agent is disabled: its tokens and connections are refused from now on."
        )

    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=site, db=sqlite_db, org_id=setup.org_id, clock=paywarden.clock, role="owner"
        )
        async with eliciting_client(
            paywarden.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            result = await call_while_deciding(
                client,
                {"url": seller.url("/premium"), "maxAmountUsd": "1.00"},
                elicitations,
                disable_on_the_dashboard,
            )
            ended = time.monotonic()
        error = error_of(result)
        assert error["code"] == "agent_disabled"
        assert ended - disabled_at[0] < WAIT_MS / 1000 / 4, "the call was not ended by disabling"
        assert _status(sqlite_db, approval_id_of(elicitations.only())) == "denied"
        assert seller.payment_signatures("/premium") == signed_before
        await expect(page.get_by_role("button", name="Enable field-bot")).to_be_visible()
        await _both_sizes(page, screenshots, "agent-disabled")

        # The agent's next call is refused at the door, with its token or its OAuth connection's.
        for token in (setup.token, granted):
            refused = await anyio.to_thread.run_sync(call_tool, paywarden.mcp_url, token, "get_budget")
            assert refused.status_code == 401
            assert "The agent of this token is disabled." in refused.headers["www-authenticate"]

        # A viewer sees the same page with every form disabled.
        await page.get_by_role("button", name="Sign out").click()
        await enrol_member(
            page, pages_url=site, db=sqlite_db, org_id=setup.org_id, clock=paywarden.clock, role="viewer"
        )
        await page.goto(agent_page)
        await expect(page.get_by_role("heading", level=1)).to_have_text("field-bot")
        for button in ("Save the policy", "Issue a token", "Enable field-bot"):
            await expect(page.get_by_role("button", name=button)).to_be_disabled()
        await expect(page.get_by_label("Daily cap (USD)")).to_be_disabled()
        await _both_sizes(page, screenshots, "agent-viewer")
