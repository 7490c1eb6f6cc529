"""The dashboard in real Chromium, on a 390-pixel phone and a 1280-pixel desktop: an owner signs
in with a passkey, reads the overview, lowers an agent's daily cap on its page, and that agent's
next fetch_paid is denied under the new policy version; raising the cap goes to the sudo page;
issuing a token shows it once. Every page is checked for a language, one heading, a label on
every control and no sideways scrolling; screenshots are kept in the test output."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from server.models import Agent
from server.policy.service import current_policy
from tests.support.approval_page import enrol_member
from tests.support.browser import PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PAGE_TIMEOUT_S = 120
DESKTOP = {"width": 1280, "height": 900}

_AUDIT = """() => {
  const unlabelled = [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label')).map(el => el.name || el.id);
  return {
    lang: document.documentElement.lang,
    h1: document.querySelectorAll('h1').length,
    unlabelled,
    overflow: document.documentElement.scrollWidth > window.innerWidth,
  };
}"""


@pytest.fixture
def paywarden(sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(sqlite_db.url, public_host="localhost", extra=extra) as running:
        yield running


async def _check_page(page: Page) -> None:
    found = await page.evaluate(_AUDIT)
    assert found["lang"] == "en"
    assert found["h1"] == 1
    assert found["unlabelled"] == []
    assert found["overflow"] is False, "the page scrolls sideways"


async def _both_sizes(page: Page, screenshots: Screenshots, label: str) -> None:
    for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
        await page.set_viewport_size(size)  # type: ignore[arg-type]
        await _check_page(page)
        await screenshots.take(page, f"{label}-{name}")


def _version(db: Database, agent_id: str) -> int:
    with db.read() as session:
        agent = session.get(Agent, agent_id)
        assert agent is not None
        return current_policy(session, agent).version


async def test_an_owner_lowers_a_cap_and_the_agents_next_payment_is_denied(
    paywarden: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    funded_wallet: FundedWallet,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    del authenticator  # present on the page: the passkey is made there
    setup = make_agent(
        sqlite_db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        name="research-bot",
    )
    pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    site = paywarden.settings.pages_url
    with anyio.fail_after(PAGE_TIMEOUT_S):
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert paid["status"] == "paid"

        await enrol_member(
            page, pages_url=site, db=sqlite_db, org_id=setup.org_id, clock=paywarden.clock, role="owner"
        )
        await page.goto(f"{site}/admin")
        today = page.locator("#today")
        await expect(today).to_contain_text("$0.01 of its $10.00 daily cap (0%)")
        await expect(page.locator("svg.chart")).to_have_attribute("role", "img")
        await _both_sizes(page, screenshots, "overview")

        await page.get_by_role("link", name="research-bot").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("research-bot")
        await expect(page.locator("#balance")).to_contain_text("USDC")
        await _both_sizes(page, screenshots, "agent")

        # Lowering the daily cap below the price applies at once.
        before = _version(sqlite_db, setup.agent_id)
        await page.get_by_label("Daily cap (USD)").fill("0.005")
        await page.get_by_role("button", name="Save the policy").click()
        await expect(page.get_by_role("status")).to_have_text(
            "The policy was changed: the new version applies to the agent's next payment."
        )
        after = _version(sqlite_db, setup.agent_id)
        assert after == before + 1
        await expect(page.locator("p.lead")).to_contain_text(f"under policy version {after}.")
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert error["code"] == "policy_denied"
        assert error["reasons"] == ["daily_cap_exceeded"]
        assert error["policyVersion"] == after

        # A mistyped amount is refused beside its field, and the field says so.
        await page.get_by_label("Daily cap (USD)").fill("lots")
        await page.get_by_role("button", name="Save the policy").click()
        await expect(page.locator("#daily_cap_usd-error")).to_contain_text("daily-cap:")
        await expect(page.get_by_label("Daily cap (USD)")).to_have_attribute("aria-invalid", "true")
        await screenshots.take(page, "invalid-cap")

        # Raising it again asks for the passkey first (the sudo page), and nothing changed.
        await page.goto(f"{site}/admin/agents/{setup.agent_id}")
        await page.get_by_label("Daily cap (USD)").fill("20.00")
        await page.get_by_role("button", name="Save the policy").click()
        await page.wait_for_url(f"**/account/sudo?next=%2Fadmin%2Fagents%2F{setup.agent_id}")
        assert _version(sqlite_db, setup.agent_id) == after

        # The passkey confirms it is the owner; back on the agent page, the raise is made.
        await page.get_by_role("button", name="Confirm with a passkey").click()
        await page.wait_for_url(f"**/admin/agents/{setup.agent_id}")
        await page.get_by_label("Daily cap (USD)").fill("20.00")
        await page.get_by_role("button", name="Save the policy").click()
        await expect(page.get_by_role("status")).to_contain_text("The policy was changed")
        assert _version(sqlite_db, setup.agent_id) == after + 1

        # Still in sudo mode: a token is issued and shown this once.
        await page.goto(f"{site}/admin/agents/{setup.agent_id}")
        await page.get_by_label("Label").fill("nightly job")
        await page.get_by_role("button", name="Issue a token").click()
        token = page.locator("#issued-token")
        await expect(token).to_contain_text("pw_at_")
        secret = (await token.inner_text()).strip()
        await screenshots.take(page, "token-shown-once")
        await page.goto(f"{site}/admin/agents/{setup.agent_id}")  # coming back: a new GET
        await expect(page.locator("#issued-token")).to_have_count(0)
        assert secret not in await page.content()
        await expect(page.get_by_role("heading", name="nightly job")).to_be_visible()
