"""The agent's page shows its wallet's balance from the chain (anvil with TestUSDC) and, as
get_budget does, a warning when the wallet holds less than one day of the agent's caps."""

from __future__ import annotations

import pytest

from server.kit.db import Database
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.oauth import enrolled_person
from tests.support.paywarden import chain_environ, serve
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.chain]


def test_the_agent_page_warns_when_the_wallet_holds_less_than_a_day(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(sqlite_db.url, public_host="localhost", extra=extra) as server:
        owner = enrolled_person(server, sqlite_db)
        try:
            agent = make_agent(
                sqlite_db,
                server.settings,
                allow_hosts=["api.example.com"],
                daily_cap="20.00",
                org_id=owner.agent.org_id,
                name="short",
                wallet_key=funded_wallet.private_key,
            )
            page = owner.browser.get(f"/admin/agents/{agent.agent_id}")
            assert page.status_code == 200
            assert '<dd id="balance">10.00 USDC</dd>' in page.text
            assert 'id="low-balance"' in page.text
            assert "less than one day of this agent's caps (20.00 USD)" in page.text

            test_usdc.mint(funded_wallet.address, 10_000_000)  # a day's worth now: no warning
            page = owner.browser.get(f"/admin/agents/{agent.agent_id}")
            assert '<dd id="balance">20.00 USDC</dd>' in page.text
            assert 'id="low-balance"' not in page.text
        finally:
            owner.browser.close()
