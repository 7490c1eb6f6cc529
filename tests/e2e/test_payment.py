"""A real payment, end to end: an MCP client over HTTP calls fetch_paid on a running Paywarden,
which pays a real x402 seller whose facilitator settles on anvil. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
import json

import httpx
import pytest

from server.kit.db import Database
from server.models import PaymentIntent
from tests.support.chain import TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, error_of, mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC


def _agent(
    server: RunningServer,
    db: Database,
    wallet: FundedWallet,
    seller: Seller,
    *,
    max_per_tx: str = "1.00",
    daily_cap: str = "10.00",
) -> str:
    setup = make_agent(
        db,
        server.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=wallet.private_key,
        max_per_tx=max_per_tx,
        daily_cap=daily_cap,
    )
    # These tests are not about the first-payment hold for a new payee: the catalog pins it.
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    return setup.token


async def test_fetch_paid_pays_once_and_moves_exactly_the_price(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    token = _agent(paywarden, db, funded_wallet, seller, max_per_tx="0.10", daily_cap="1.00")
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    seller_before = test_usdc.balance_of(seller.pay_to)
    signatures_before = seller.payment_signatures("/premium")

    async with mcp_client(paywarden.mcp_url, token) as client:
        result = await client.call_tool("fetch_paid", {"url": seller.url("/premium"), "maxAmountUsd": "0.05"})
        paid = structured(result)
        assert paid["status"] == "paid"
        assert paid["amountUsd"] == "0.01"
        assert paid["replayed"] is False
        assert paid["network"] == "eip155:84532"
        assert paid["payTo"] == seller.pay_to
        assert paid["receipt"]["state"] == "settled"
        assert paid["receipt"]["txHash"].startswith("0x")
        assert paid["body"]["untrusted"] is True
        # The body is only in its own fenced block, never among the metadata.
        texts = [block.text for block in result.content]  # type: ignore[union-attr]
        assert any("UNTRUSTED THIRD-PARTY CONTENT" in t and '"ok"' in t for t in texts[1:])
        assert '"ok": true' not in texts[0]
        assert "text" not in paid["body"]

        assert test_usdc.balance_of(funded_wallet.address) == buyer_before - PREMIUM
        assert test_usdc.balance_of(seller.pay_to) == seller_before + PREMIUM
        assert seller.payment_signatures("/premium") == signatures_before + 1

        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["spentTodayUsd"] == "0.01"
        assert budget["remainingTodayUsd"] == "0.99"

        # The same purchase again, by its key: answered from the ledger, nothing moves.
        replay = structured(
            await client.call_tool(
                "fetch_paid",
                {
                    "url": seller.url("/premium"),
                    "maxAmountUsd": "0.05",
                    "idempotencyKey": paid["idempotencyKey"],
                },
            )
        )
        assert replay["status"] == "paid"
        assert replay["replayed"] is True
        assert replay["intentId"] == paid["intentId"]
        assert test_usdc.balance_of(funded_wallet.address) == buyer_before - PREMIUM
        assert seller.payment_signatures("/premium") == signatures_before + 1


async def test_denied_payments_move_nothing(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    token = _agent(paywarden, db, funded_wallet, seller, max_per_tx="0.10", daily_cap="0.015")
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    seller_before = test_usdc.balance_of(seller.pay_to)
    signatures_before = seller.payment_signature_counts

    async with mcp_client(paywarden.mcp_url, token) as client:
        # Not an allowed host: nothing is even requested.
        other_host = seller.url("/premium").replace("127.0.0.1", "localhost")
        error = error_of(await client.call_tool("fetch_paid", {"url": other_host}))
        assert error["code"] == "host_not_allowed"
        assert error["host"] == "localhost"

        # Over the per-payment maximum (0.50 > 0.10).
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/report")}))
        assert error["code"] == "policy_denied"
        assert "amount_exceeds_per_transaction" in error["reasons"]
        assert isinstance(error["policyVersion"], int)

        # Over this call's own maximum.
        error = error_of(
            await client.call_tool("fetch_paid", {"url": seller.url("/premium"), "maxAmountUsd": "0.005"})
        )
        assert error["code"] == "amount_exceeds_max"
        assert error["amountUsd"] == "0.01"

        # The first 0.01 fits under the 0.015 daily cap; the second does not.
        assert (
            structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))["status"]
            == "paid"
        )
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert error["code"] == "policy_denied"
        assert error["reasons"] == ["daily_cap_exceeded"]

    assert test_usdc.balance_of(funded_wallet.address) == buyer_before - PREMIUM
    assert test_usdc.balance_of(seller.pay_to) == seller_before + PREMIUM
    after = seller.payment_signature_counts
    assert after.get("/report", 0) == signatures_before.get("/report", 0)
    assert after.get("/premium", 0) == signatures_before.get("/premium", 0) + 1


async def test_free_route_returns_ok_without_paying(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    token = _agent(paywarden, db, funded_wallet, seller)
    async with mcp_client(paywarden.mcp_url, token, mode="legacy") as client:
        result = structured(await client.call_tool("fetch_paid", {"url": seller.url("/free")}))
        assert result["status"] == "ok"
        assert result["httpStatus"] == 200
        assert result["host"] == "127.0.0.1"


async def test_a_paid_call_keeps_its_receipt_but_never_the_body(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    token = _agent(paywarden, db, funded_wallet, seller)
    # The terms the seller offers, read straight off its own 402.
    async with httpx.AsyncClient(timeout=10) as http:
        challenge = await http.get(seller.url("/premium"))
    assert challenge.status_code == 402
    (offered,) = json.loads(base64.b64decode(challenge.headers["payment-required"]))["accepts"]
    terms = hashlib.sha256(json.dumps(offered, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    async with mcp_client(paywarden.mcp_url, token) as client:
        paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert paid["status"] == "paid"
        served = seller.served("/premium")
        assert served  # what the seller sent for the paid request, byte for byte
        listed = structured(await client.call_tool("list_payments", {"limit": 1}))

    (item,) = listed["payments"]
    assert item["intentId"] == paid["intentId"]
    assert item["bodySha256"] == hashlib.sha256(served).hexdigest()
    assert item["bodyBytes"] == len(served)
    assert item["bodyTruncated"] is False
    assert item["contentType"] == "application/json"
    assert item["termsSha256"] == terms
    assert item["transactionHash"] == paid["receipt"]["txHash"]
    # The seller's settlement header as it arrived: its claim names the same transaction.
    claim = json.loads(base64.b64decode(item["paymentResponse"]))
    assert (claim["success"], claim["transaction"]) == (True, paid["receipt"]["txHash"])

    with db.read() as session:
        row = session.get(PaymentIntent, paid["intentId"])
        assert row is not None
        kept = row.model_dump()
    # The body is nowhere in the row: only its digest.
    assert not any(isinstance(value, str) and '"ok"' in value for value in kept.values())
    assert kept["payment_response"] == item["paymentResponse"]
