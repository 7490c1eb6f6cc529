"""Payments from a `cdp` wallet, end to end: an MCP client calls fetch_paid on a running Paywarden
whose agent's wallet is an account at the CDP stand-in (connected with `paywarden admin wallet
connect-cdp`, as an operator does). CDP's signature pays the x402 SDK's seller on anvil: the payer's
balance moves by exactly the price. When CDP's own policy refuses, or CDP is out of reach, the
payment fails closed with its own code before anything reaches the seller, and nothing moves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import anyio
import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.policy.service import PolicyChanges
from tests.support.cdp import connect_cdp
from tests.support.cdp_standin import CdpStandIn, running_standin
from tests.support.chain import Anvil, TestToken
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import change_policy, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
REPORT = 500_000  # 0.50 USDC


@dataclass(frozen=True)
class Stage:
    server: RunningServer
    standin: CdpStandIn
    api_url: str
    chain: dict[str, str]


@pytest.fixture(scope="module", name="stage")
def fixture_stage(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller
) -> Iterator[Stage]:
    """One Paywarden for the module, paying on anvil, whose CDP is the stand-in. The catalog pins
    the seller's payee (these tests are not about the first-payment hold for a new payee)."""
    chain = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    pin_payee(module_sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    with running_standin() as (standin, url):
        extra = {**chain, "PAYWARDEN_CDP_API_URL": url}
        with serve(module_sqlite_db.url, extra=extra) as server:
            yield Stage(server, standin, url, chain)


@dataclass(frozen=True)
class CdpAgent:
    org_id: str
    agent_id: str
    token: str
    address: str
    policy_id: str


async def _cdp_agent(stage: Stage, db: Database, test_usdc: TestToken, *, max_per_tx: str) -> CdpAgent:
    """An agent of a new organisation whose wallet is an account at the stand-in, holding 10 USDC
    (the command runs an event loop of its own: in a thread of its own, as in a process of its own)."""
    setup = make_agent(db, stage.server.settings, allow_hosts=["127.0.0.1"], max_per_tx=max_per_tx)
    credentials = stage.standin.credentials
    result = await anyio.to_thread.run_sync(
        lambda: connect_cdp(
            db, api_url=stage.api_url, agent=setup.agent_id, credentials=credentials, env=stage.chain
        )
    )
    wallet = result.json()
    test_usdc.mint(wallet["address"], 10_000_000)
    return CdpAgent(setup.org_id, setup.agent_id, setup.token, wallet["address"], wallet["cdpPolicyId"])


def _intents(db: Database, agent_id: str) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent_id)).all())


def _events(db: Database, org_id: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id)).all())


async def test_fetch_paid_from_a_cdp_wallet_pays_the_seller_exactly_the_price(
    stage: Stage, module_sqlite_db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    agent = await _cdp_agent(stage, module_sqlite_db, test_usdc, max_per_tx="0.10")
    buyer_before = test_usdc.balance_of(agent.address)
    seller_before = test_usdc.balance_of(seller.pay_to)
    signatures_before = seller.payment_signatures("/premium")
    signed_before = stage.standin.count("POST", r"/sign/typed-data$")

    async with mcp_client(stage.server.mcp_url, agent.token) as client:
        paid = structured(
            await client.call_tool("fetch_paid", {"url": seller.url("/premium"), "maxAmountUsd": "0.05"})
        )

    assert paid["status"] == "paid"
    assert paid["amountUsd"] == "0.01"
    assert paid["receipt"]["state"] == "settled"
    assert test_usdc.balance_of(agent.address) == buyer_before - PREMIUM
    assert test_usdc.balance_of(seller.pay_to) == seller_before + PREMIUM
    assert seller.payment_signatures("/premium") == signatures_before + 1
    assert stage.standin.count("POST", r"/sign/typed-data$") == signed_before + 1
    (intent,) = _intents(module_sqlite_db, agent.agent_id)
    assert intent.payer == agent.address
    secrets = (stage.standin.credentials.api_key_secret, stage.standin.credentials.wallet_secret)
    assert all(
        secret not in json.dumps(e.data)
        for e in _events(module_sqlite_db, agent.org_id)
        for secret in secrets
    )


async def test_a_payment_cdps_own_policy_refuses_fails_closed_audited_and_reaches_no_seller(
    stage: Stage, module_sqlite_db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    # CDP holds the policy compiled for 0.10 a payment; Paywarden's now allows 1.00, and no wallet
    # policy job runs here to send it: CDP still refuses the 0.50 report, and says so.
    agent = await _cdp_agent(stage, module_sqlite_db, test_usdc, max_per_tx="0.10")
    change_policy(module_sqlite_db, agent.agent_id, PolicyChanges(max_usd_per_tx=Decimal("1.00")))
    buyer_before = test_usdc.balance_of(agent.address)
    signatures_before = seller.payment_signatures("/report")

    async with mcp_client(stage.server.mcp_url, agent.token) as client:
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/report")}))
        budget = structured(await client.call_tool("get_budget", {}))

    assert error["code"] == "cdp_policy_refused"
    (intent,) = _intents(module_sqlite_db, agent.agent_id)
    assert error["intentId"] == intent.id
    assert (intent.status, intent.failure_code, intent.submitted_at) == ("failed", "cdp_policy_refused", None)
    (refused,) = [e for e in _events(module_sqlite_db, agent.org_id) if e.type == "wallet.cdp_policy_refused"]
    assert refused.subject_id == intent.id
    assert (refused.data["address"], refused.data["cdpPolicyId"]) == (agent.address, agent.policy_id)
    assert budget["spentTodayUsd"] == "0.00"
    assert seller.payment_signatures("/report") == signatures_before
    assert test_usdc.balance_of(agent.address) == buyer_before


async def test_cdp_out_of_reach_fails_the_payment_closed_before_the_seller(
    stage: Stage, module_sqlite_db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    agent = await _cdp_agent(stage, module_sqlite_db, test_usdc, max_per_tx="0.10")
    buyer_before = test_usdc.balance_of(agent.address)
    signatures_before = seller.payment_signatures("/premium")
    stage.standin.down = True
    try:
        async with mcp_client(stage.server.mcp_url, agent.token) as client:
            error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
    finally:
        stage.standin.down = False

    assert error["code"] == "cdp_unavailable"
    (intent,) = _intents(module_sqlite_db, agent.agent_id)
    assert (intent.status, intent.failure_code) == ("failed", "cdp_unavailable")
    assert seller.payment_signatures("/premium") == signatures_before
    assert test_usdc.balance_of(agent.address) == buyer_before
