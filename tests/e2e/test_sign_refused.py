"""A payment the signer was not authorised to make is refused on the real server: the call answers
`sign_refused`, the intent fails without a signature, the wallet's audit says why (and holds no
secret), and nothing reaches the seller or moves on anvil. The tampering stands for a compromised
process between the ledger and the signer: the signer's own check is what stops it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.payments import purchase
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.wallets import service as wallets
from tests.support.chain import TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, error_of, mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

ATTACKER = "0x1111111111111111111111111111111111111111"


def _another_payee(selection: Any) -> TransferRequest:
    return dataclasses.replace(wallets.transfer_request(selection), pay_to=ATTACKER)


def _a_larger_amount(intent: PaymentIntent) -> AuthorisedIntent:
    signed = wallets.intent_to_sign(intent)
    return dataclasses.replace(signed, amount_atomic=signed.amount_atomic * 100)


def _a_longer_window(intent: PaymentIntent) -> AuthorisedIntent:
    signed = wallets.intent_to_sign(intent)
    return dataclasses.replace(signed, valid_before=signed.valid_after + 86_400)


@pytest.mark.parametrize(
    ("target", "tampered", "reason"),
    [
        ("transfer_request", _another_payee, "payee_mismatch"),
        ("intent_to_sign", _a_larger_amount, "amount_mismatch"),
        ("intent_to_sign", _a_longer_window, "window_too_long"),
    ],
)
async def test_a_payment_the_ledger_did_not_authorise_is_refused_and_audited(
    paywarden: RunningServer,
    db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    tampered: Any,
    reason: str,
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    monkeypatch.setattr(purchase, target, tampered)
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    signatures_before = seller.payment_signatures("/premium")

    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        budget = structured(await client.call_tool("get_budget", {}))

    assert error["code"] == "sign_refused"
    assert error["reason"] == reason
    with db.read() as session:
        (intent,) = session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all()
        events = session.exec(
            select(AuditEvent).where(AuditEvent.org_id == setup.org_id).order_by(AuditEvent.seq)  # type: ignore[arg-type]
        ).all()
    assert error["intentId"] == intent.id
    assert (intent.status, intent.failure_code, intent.submitted_at) == ("failed", "sign_refused", None)
    (refused,) = [e for e in events if e.type == "wallet.sign_refused"]
    assert refused.subject_id == intent.id
    assert refused.agent_id == setup.agent_id
    assert refused.data["reason"] == reason
    assert refused.data["address"] == funded_wallet.address
    assert set(refused.data) == {"reason", "wallet", "address", "mode", "requestId"}
    key_hex = funded_wallet.private_key.removeprefix("0x").lower()
    assert all(key_hex not in str(e.data).lower() for e in events)
    assert "payment.submitted" not in {e.type for e in events}
    # Nothing was signed, so nothing counts against the caps, reaches the seller or moves.
    assert budget["spentTodayUsd"] == "0.00"
    assert seller.payment_signatures("/premium") == signatures_before
    assert test_usdc.balance_of(funded_wallet.address) == buyer_before
