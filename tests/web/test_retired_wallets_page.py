"""The agent's page lists the wallets a rotation retired, each with what it holds on-chain (anvil with
TestUSDC) and its last sweep, and says how to sweep it; in real Chromium, on a phone and a
desktop, with screenshots kept."""

from __future__ import annotations

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from tests.support.approval_page import enrol_member
from tests.support.browser import PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import Anvil, TestToken
from tests.support.oauth import enrolled_person
from tests.support.paywarden import serve
from tests.support.sweeps import SweepChain, rotated_agent, sweep_with_gas, wallet_command

pytestmark = [pytest.mark.chain]

DESKTOP = {"width": 1280, "height": 900}
PAGE_TIMEOUT_S = 120
_LAYOUT = """() => ({
  h1: document.querySelectorAll('h1').length,
  overflow: document.documentElement.scrollWidth > window.innerWidth,
})"""


def test_the_page_shows_a_retired_wallets_balance_then_its_sweep(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken
) -> None:
    chain = SweepChain(anvil, test_usdc, anvil.rpc_url)
    with serve(sqlite_db.url, public_host="localhost", extra=chain.environ()) as server:
        owner = enrolled_person(server, sqlite_db)
        try:
            agent = rotated_agent(
                sqlite_db, chain, funded_atomic=4_000_000, org_id=owner.agent.org_id, name="old-keys"
            )

            page = owner.browser.get(f"/admin/agents/{agent.setup.agent_id}")

            assert page.status_code == 200
            assert '<h3 id="retired-heading">Retired wallets</h3>' in page.text
            assert f'<code class="full">{agent.old}</code>' in page.text
            assert "<dt>Balance on Base Sepolia</dt><dd>4.00 USDC</dd>" in page.text
            assert "<code>paywarden admin wallet sweep --agent old-keys</code>" in page.text
            assert '<dd id="balance">0.00 USDC</dd>' in page.text  # the current wallet, still empty
            assert "Last sweep" not in page.text

            sweep_with_gas(sqlite_db, chain, agent.setup.agent_id)
            page = owner.browser.get(f"/admin/agents/{agent.setup.agent_id}")

            assert '<dd id="balance">4.00 USDC</dd>' in page.text
            assert "<dt>Balance on Base Sepolia</dt><dd>0.00 USDC</dd>" in page.text
            assert "<dt>Last sweep</dt><dd>4.00 USDC, moved to the current wallet" in page.text
        finally:
            owner.browser.close()


@pytest.mark.anyio
async def test_the_retired_wallets_read_well_on_a_phone_and_a_desktop(
    sqlite_db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    del authenticator  # present on the page: the passkey is made there
    chain = SweepChain(anvil, test_usdc, anvil.rpc_url)
    with serve(sqlite_db.url, public_host="localhost", extra=chain.environ()) as server:
        # The commands run an event loop of their own: each in a thread, as in a process of its own.
        first = await anyio.to_thread.run_sync(
            lambda: rotated_agent(sqlite_db, chain, funded_atomic=2_500_000, name="rotated-twice")
        )
        # Swept, then rotated once more: two retired wallets, the first swept into the second.
        await anyio.to_thread.run_sync(lambda: sweep_with_gas(sqlite_db, chain, first.setup.agent_id))
        await anyio.to_thread.run_sync(
            lambda: wallet_command(sqlite_db, chain, "rotate", "--agent", first.setup.agent_id).stdout
        )
        site = server.settings.pages_url
        with anyio.fail_after(PAGE_TIMEOUT_S):
            await enrol_member(
                page,
                pages_url=site,
                db=sqlite_db,
                org_id=first.setup.org_id,
                clock=server.clock,
                role="viewer",
            )
            await page.goto(f"{site}/admin/agents/{first.setup.agent_id}")
            retired = page.get_by_role("list", name="Retired wallets")
            await expect(retired.get_by_role("listitem")).to_have_count(2)
            newer, older = retired.get_by_role("listitem").nth(0), retired.get_by_role("listitem").nth(1)
            await expect(newer).to_contain_text(first.new)
            await expect(newer).to_contain_text("Balance on Base Sepolia2.50 USDC")
            await expect(older).to_contain_text(first.old)
            await expect(older).to_contain_text("2.50 USDC, moved to the current wallet")
            for name, size in (("phone", PHONE), ("desktop", DESKTOP)):
                await page.set_viewport_size(size)  # type: ignore[arg-type]
                layout = await page.evaluate(_LAYOUT)
                assert layout == {"h1": 1, "overflow": False}, name
                await screenshots.take(page, f"retired-wallets-{name}")
