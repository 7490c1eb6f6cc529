"""More room asked for by an agent and decided by a person, end to end: the official MCP client
calls fetch_paid on a running Paywarden, a real x402 seller and anvil, and is refused by its
policy; it calls request_policy_change; an owner signed in with a passkey in headless Chromium
(390 pixels wide, then 1280) opens the request's page and decides there.

- approved: the agent's next fetch_paid pays under the policy version the approval made, by the
  member who approved it, and the price moves on chain;
- rejected: nothing changes, and the next fetch_paid is refused as before;
- with URL elicitation declared, the same request_policy_change call waits while the person
  approves on the offered page, at protocol 2025-11-25 (one `elicitation/create`, then
  `notifications/elicitation/complete`) and at 2026-07-28 (the SDK retries with the sealed
  state, and that retry waits).

Screenshots of every page are kept in the test output."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import pytest
from mcp_types import ElicitRequestURLParams
from playwright.async_api import Page, expect
from sqlmodel import select

from server.kit.db import Database
from server.mcp.policy_change_offers import PROMPT_MESSAGE
from server.models import PaymentIntent, PolicyVersion
from tests.support.approval_page import decide_change_on_page, enrol_member
from tests.support.browser import DESKTOP, PHONE, Screenshots, VirtualAuthenticator, check_page
from tests.support.chain import Anvil, TestToken
from tests.support.elicitation import LEGACY, MODERN, UrlElicitations, call_while_deciding, eliciting_client
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import AgentSetup, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
TEST_TIMEOUT_S = 120
NOTE = "The user asked for today's premium report; it costs 0.01 USD, over my 0.005 USD limit."
ASK = {"note": NOTE, "change": {"maxUsdPerTx": "0.05"}}


@pytest.fixture
def server(sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": "30000",
    }
    with serve(sqlite_db.url, public_host="localhost", extra=extra) as running:
        yield running


@dataclass(frozen=True)
class Scene:
    server: RunningServer
    db: Database
    agent: AgentSetup
    member_id: str
    seller: Seller
    page: Page
    screenshots: Screenshots

    async def decide(self, url: str, *, approve: bool) -> None:
        await decide_change_on_page(
            self.page,
            url,
            approve=approve,
            screenshots=self.screenshots,
            pages_url=self.server.settings.pages_url,
            agent="reporter",
        )


@pytest.fixture
async def scene(
    server: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    funded_wallet: FundedWallet,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> Scene:
    """An agent that may pay the seller 0.005 USD at most (its premium route costs 0.01), and an
    owner of its organisation signed in on a phone with a passkey."""
    agent = make_agent(
        sqlite_db,
        server.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        max_per_tx="0.005",
        name="reporter",
    )
    pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)  # not about the new-payee hold
    await page.set_viewport_size(PHONE)
    with anyio.fail_after(TEST_TIMEOUT_S):
        member_id = await enrol_member(
            page,
            pages_url=server.settings.pages_url,
            db=sqlite_db,
            org_id=agent.org_id,
            clock=server.clock,
            role="owner",
        )
    return Scene(server, sqlite_db, agent, member_id, seller, page, screenshots)


def _policy_of(db: Database, agent_id: str) -> tuple[int, str]:
    with db.read() as session:
        newest = session.exec(
            select(PolicyVersion)
            .where(PolicyVersion.agent_id == agent_id)
            .order_by(PolicyVersion.version.desc())  # type: ignore[attr-defined]
        ).first()
    assert newest is not None
    return newest.version, newest.created_by


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
async def test_the_next_payment_follows_what_the_person_decided(
    scene: Scene, test_usdc: TestToken, approve: bool
) -> None:
    server, seller = scene.server, scene.seller
    paying = {"url": seller.url("/premium"), "maxAmountUsd": "0.05"}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with mcp_client(server.mcp_url, scene.agent.token) as client:
            refused = error_of(await client.call_tool("fetch_paid", paying))
            assert (refused["code"], refused["policyVersion"]) == ("policy_denied", 2)
            assert "amount_exceeds_per_transaction" in refused["reasons"]
            asked = structured(await client.call_tool("request_policy_change", ASK))
            assert (asked["status"], asked["approvalPrompt"]) == ("pending", "not_supported")

            await scene.decide(asked["manageUrl"], approve=approve)
            await check_page(scene.page)
            await scene.page.set_viewport_size(DESKTOP)
            await scene.screenshots.take(scene.page, "decided-desktop")

            status = structured(
                await client.call_tool("get_policy_change_status", {"requestId": asked["requestId"]})
            )
            before = test_usdc.balance_of(seller.pay_to)
            if approve:
                assert (status["status"], status["appliedPolicyVersion"]) == ("approved", 3)
                assert _policy_of(scene.db, scene.agent.agent_id) == (3, f"member:{scene.member_id}")
                paid = structured(await client.call_tool("fetch_paid", paying))
                assert (paid["status"], paid["amountUsd"], paid["receipt"]["state"]) == (
                    "paid",
                    "0.01",
                    "settled",
                )
                assert test_usdc.balance_of(seller.pay_to) == before + PREMIUM
                with scene.db.read() as session:
                    intent = session.get(PaymentIntent, paid["intentId"])
                assert intent is not None
                assert intent.policy_version == 3
            else:
                assert (status["status"], status["appliedPolicyVersion"]) == ("rejected", None)
                assert _policy_of(scene.db, scene.agent.agent_id)[0] == 2
                again = error_of(await client.call_tool("fetch_paid", paying))
                assert (again["code"], again["policyVersion"]) == ("policy_denied", 2)
                assert test_usdc.balance_of(seller.pay_to) == before


async def test_an_approver_sees_the_request_with_its_note_but_no_buttons(
    scene: Scene, page: Page, screenshots: Screenshots
) -> None:
    async with mcp_client(scene.server.mcp_url, scene.agent.token) as client:
        asked = structured(await client.call_tool("request_policy_change", ASK))
    owner_view = asked["manageUrl"]
    await page.goto(owner_view)
    await check_page(page)
    await expect(page.locator("#agent-note")).to_have_text(NOTE)
    await expect(page.get_by_text("Written by the agent, not by Paywarden or by a person")).to_be_visible()
    await screenshots.take(page, "owner-phone")
    await page.set_viewport_size(DESKTOP)
    await screenshots.take(page, "owner-desktop")
    await page.context.clear_cookies()
    await page.set_viewport_size(PHONE)
    with anyio.fail_after(TEST_TIMEOUT_S):
        await enrol_member(
            page,
            pages_url=scene.server.settings.pages_url,
            db=scene.db,
            org_id=scene.agent.org_id,
            clock=scene.server.clock,
            role="approver",
        )
    await page.goto(owner_view)
    await expect(page.get_by_role("heading", level=1)).to_have_text("Change what agent reporter may pay?")
    await expect(page.get_by_role("button", name="Approve the change")).to_have_count(0)
    await expect(
        page.get_by_text("Only an owner or admin of your organisation may approve or reject")
    ).to_be_visible()
    await check_page(page)
    await screenshots.take(page, "approver-phone")


@pytest.mark.parametrize("mode", [LEGACY, MODERN], ids=["2025-11-25", "2026-07-28"])
async def test_the_call_waits_while_the_person_approves_on_the_offered_page(scene: Scene, mode: str) -> None:
    elicitations = UrlElicitations("accept")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with eliciting_client(
            scene.server.mcp_url, scene.agent.token, mode=mode, elicitations=elicitations
        ) as client:

            async def decide(request: ElicitRequestURLParams) -> None:
                assert (request.mode, request.message) == ("url", PROMPT_MESSAGE)
                await scene.decide(request.url, approve=True)

            result = await call_while_deciding(
                client, ASK, elicitations, decide, tool="request_policy_change"
            )
    decided = structured(result)
    assert (decided["status"], decided["approvalPrompt"], decided["appliedPolicyVersion"]) == (
        "approved",
        "accepted",
        3,
    )
    assert elicitations.only().url == decided["manageUrl"]
    if mode == LEGACY:
        assert len(elicitations.completed) == 1  # the client may close its prompt
