"""The x402 payment-identifier extension end to end, against a seller built with the x402 SDK's own
extension support on anvil (tests/support/payment_identifiers.py): the identifier derived from the
payment travels in fetch_paid's and pay_x402's payments, every sending of one purchase carries the
same one, so the seller charges once however often it arrives, and the seller's 409 for an
identifier it knows from another payment is `payment_identifier_conflict`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import PaymentIntent
from server.payments import decisions
from server.x402.payment_identifier import payment_identifier
from tests.e2e.test_approvals import Money
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.handover import challenge_of, pay_args, send
from tests.support.payment_identifiers import IdentifierLedger
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.principals import OPERATOR
from tests.support.seller import Seller
from tests.support.tenants import AgentSetup, make_agent, make_member, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC


@pytest.fixture(scope="module")
def server(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, identifier_seller: Seller
) -> Iterator[RunningServer]:
    pin_payee(module_sqlite_db, url=identifier_seller.url("/premium"), pay_to=identifier_seller.pay_to)
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(module_sqlite_db.url, extra=extra) as running:
        yield running


def _agent(server: RunningServer, db: Database, wallet: FundedWallet, **policy: Any) -> AgentSetup:
    return make_agent(db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=wallet.private_key, **policy)


def _ledger(seller: Seller) -> IdentifierLedger:
    assert seller.identifiers is not None
    return seller.identifiers


async def test_fetch_paid_sends_the_payments_own_identifier(
    server: RunningServer,
    module_sqlite_db: Database,
    identifier_seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    setup = _agent(server, module_sqlite_db, funded_wallet)
    ledger, known = _ledger(identifier_seller), _ledger(identifier_seller).ids()
    money = Money(test_usdc, identifier_seller, funded_wallet.address)
    async with mcp_client(server.mcp_url, setup.token) as client:
        paid = structured(await client.call_tool("fetch_paid", {"url": identifier_seller.url("/premium")}))
    assert paid["status"] == "paid"
    identifier = payment_identifier(paid["intentId"])
    assert ledger.ids() - known == {identifier}
    assert (ledger.arrivals[identifier], ledger.settlements[identifier]) == (1, 1)
    assert money.moved() == PREMIUM


async def test_every_sending_of_a_handed_over_header_is_charged_once(
    server: RunningServer,
    module_sqlite_db: Database,
    identifier_seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    setup = _agent(server, module_sqlite_db, funded_wallet)
    ledger = _ledger(identifier_seller)
    money = Money(test_usdc, identifier_seller, funded_wallet.address)
    url = identifier_seller.url("/premium")
    required = challenge_of(identifier_seller, "/premium")
    assert "payment-identifier" in required["extensions"]
    async with mcp_client(server.mcp_url, setup.token) as client:
        signed = structured(await client.call_tool("pay_x402", pay_args(url, required)))
        identifier = payment_identifier(signed["intentId"])
        assert signed["paymentIdentifier"] == identifier

        first = send(url, signed)
        assert first.status_code == 200, first.text
        # The agent's client sends it again (a retry after a timeout, say): served from the seller's
        # record, not charged again.
        again = send(url, signed)
        assert (again.status_code, again.json()) == (200, first.json())
        # So does the header a replay with the same key hands over: it is the same one.
        replay = structured(
            await client.call_tool(
                "pay_x402", pay_args(url, required, idempotencyKey=signed["idempotencyKey"])
            )
        )
        assert (replay["headerValue"], replay["paymentIdentifier"]) == (signed["headerValue"], identifier)
        assert send(url, replay).status_code == 200
    assert (ledger.arrivals[identifier], ledger.settlements[identifier]) == (3, 1)
    assert money.moved() == PREMIUM


async def test_a_sellers_conflict_for_the_identifier_is_its_own_error(
    server: RunningServer,
    module_sqlite_db: Database,
    identifier_seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    db = module_sqlite_db
    setup = _agent(server, db, funded_wallet, step_up="0.005")  # held first: its intent exists
    member = make_member(db, setup.org_id, role="admin")
    money = Money(test_usdc, identifier_seller, funded_wallet.address)
    url = identifier_seller.url("/premium")
    async with mcp_client(server.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": url}))
        assert held["status"] == "pending_approval"
        with db.read() as session:
            intent = session.exec(
                select(PaymentIntent).where(PaymentIntent.idempotency_key == held["idempotencyKey"])
            ).one()
        # The seller already holds this identifier for another payment (its record, not ours).
        identifier = payment_identifier(intent.id)
        _ledger(identifier_seller).seed(identifier, fingerprint="another payment")
        with db.write() as session:
            decisions.decide_break_glass(
                session,
                OPERATOR,
                approval_id=held["approvalId"],
                approve=True,
                member_ref=member,
                via="cli_break_glass",
                now=server.clock.now(),
            )
        refused = error_of(
            await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": held["idempotencyKey"]})
        )
        assert (refused["code"], refused["httpStatus"], refused["intentId"]) == (
            "payment_identifier_conflict",
            409,
            intent.id,
        )
        assert refused["sellerReason"] == {"untrusted": True}
        # The key's payment failed and is not paid again.
        again = error_of(
            await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": held["idempotencyKey"]})
        )
        assert again["code"] == "approval_consumed"  # its approval paid for that one attempt
        [row] = structured(await client.call_tool("list_payments", {}))["payments"]
        assert row["status"] == "failed"
    assert _ledger(identifier_seller).conflicts[identifier] == 1
    assert _ledger(identifier_seller).settlements[identifier] == 0
    assert money.moved() == 0
    with db.read() as session:
        failed = session.get(PaymentIntent, intent.id)
        assert failed is not None
        assert (failed.failure_code, failed.seller_status) == ("payment_identifier_conflict", 409)
