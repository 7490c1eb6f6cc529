"""By default a paid answer never waits on the chain: fetch_paid answers `pending` and the look at
the chain runs in the background, after which list_payments and get_budget show the payment
`settled`. The wallet balance is known before a payment needs it, and a cached value never refuses
a payment the chain's balance allows, nor lets through one it refuses. Real seller, real anvil."""

from __future__ import annotations

import pytest

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.mcp.schemas import budget as budget_schema
from server.mcp.schemas import payments as payments_schema
from server.payments import ledger
from server.payments.budget import budget as budget_of
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import chain_environ, error_of, mcp_client, serve, structured
from tests.support.principals import OPERATOR
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PRICE = 10_000  # /premium costs 0.01 USDC


def _environ(anvil: Anvil, test_usdc: TestToken) -> dict[str, str]:
    # Paywarden's defaults: no wait for the chain before answering, balances kept 5 s.
    environ = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    return {**environ, "PAYWARDEN_SETTLEMENT_WAIT_MS": "0", "PAYWARDEN_BALANCE_CACHE_MS": "5000"}


async def test_a_pending_answer_is_settled_in_the_background_for_every_later_read(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller, funded_wallet: FundedWallet
) -> None:
    environ = _environ(anvil, test_usdc)
    with serve(sqlite_db.url, extra=environ) as first:
        setup = make_agent(
            sqlite_db, first.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
        async with mcp_client(first.mcp_url, setup.token) as client:
            paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert paid["status"] == "paid"
        assert paid["receipt"]["state"] == "pending"
        assert "txHash" not in paid["receipt"] or paid["receipt"]["txHash"] is None
    # The server finished its look before it stopped: what list_payments and get_budget render
    # from the database now says settled.
    with sqlite_db.read() as session:
        listed = payments_schema.payments_list(
            setup.agent_id, ledger.newest(session, OPERATOR, agent_id=setup.agent_id, limit=10, status=None)
        )
        budget = budget_schema.budget(
            budget_of(session, OPERATOR, agent_id=setup.agent_id, now=SystemClock().now())
        )
    [row] = listed["payments"]
    assert row["status"] == "settled"
    assert row["transactionHash"].startswith("0x")
    assert budget["spentTodayUsd"] == "0.01"
    assert seller.payment_signatures("/premium") >= 1


async def test_a_cached_balance_never_pays_what_the_chain_refuses_nor_refuses_what_it_allows(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller
) -> None:
    address, key = fresh_wallet()
    test_usdc.mint(address, PRICE)  # exactly one payment
    with serve(sqlite_db.url, extra=_environ(anvil, test_usdc)) as server:
        setup = make_agent(sqlite_db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=key)
        pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
        signatures = seller.payment_signatures("/premium")
        async with mcp_client(server.mcp_url, setup.token) as client:
            first = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert first["status"] == "paid"
            # The process knows it signed the whole balance away: the next payment reads the chain
            # again, which says 0, and is refused before anything is signed.
            refused = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert refused["code"] == "insufficient_funds"
            assert (refused["balanceUsdc"], refused["amountUsdc"]) == ("0.00", "0.01")
            assert seller.payment_signatures("/premium") == signatures + 1
            # Money arrives: the cached 0 is not trusted to refuse, the chain is read again.
            test_usdc.mint(address, PRICE)
            again = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert again["status"] == "paid"
    assert seller.payment_signatures("/premium") == signatures + 2
    assert test_usdc.balance_of(address) == 0
