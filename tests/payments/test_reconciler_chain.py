"""The reconciler asks the chain about sent payments whose authorisation lapsed: a transfer that
is there settles the intent, one that is not expires it (and it stops counting)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from eth_account import Account
from web3 import Web3

from server.chain.service import ChainService
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import PaymentIntent
from server.models.enums import IntentStatus
from server.payments.jobs import ExpireAuthorizations
from server.payments.ledger import update_intent
from server.x402.authorization import TRANSFER_WITH_AUTHORIZATION_TYPES
from tests.support.chain import TestToken, fresh_wallet, send_transaction
from tests.support.fixtures_chain import FACILITATOR_ACCOUNT, FundedWallet
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


def transfer_with_authorization(
    anvil: Any, token: TestToken, wallet: FundedWallet, row: PaymentIntent
) -> None:
    """Submit the intent's authorisation on-chain, as a seller's facilitator would."""
    message = {
        "from": wallet.address,
        "to": row.pay_to,
        "value": row.amount_atomic,
        "validAfter": row.valid_after,
        "validBefore": row.valid_before,
        "nonce": bytes.fromhex(row.nonce[2:]),
    }
    signed = Account.sign_typed_data(
        wallet.private_key,
        full_message={
            "types": TRANSFER_WITH_AUTHORIZATION_TYPES,
            "primaryType": "TransferWithAuthorization",
            "domain": {"name": "USDC", "version": "2", "chainId": 84532, "verifyingContract": token.address},
            "message": message,
        },
    )
    function = token.contract.get_function_by_signature(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    )
    data = function(
        Web3.to_checksum_address(wallet.address),
        Web3.to_checksum_address(row.pay_to),
        row.amount_atomic,
        row.valid_after,
        row.valid_before,
        message["nonce"],
        bytes(signed.signature),
    )._encode_transaction_data()
    facilitator = anvil.accounts[FACILITATOR_ACCOUNT].private_key
    send_transaction(anvil.w3, facilitator, {"to": token.address, "data": data})


async def test_lapsed_sent_payments_are_settled_or_expired_from_chain_logs(
    db: Database, anvil: Any, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    payee, _ = fresh_wallet()
    pin_payee(db, url="https://api.example.com/v1/search", pay_to=payee)
    now = datetime.now(UTC)
    rows = []
    for key in ("landed-0001", "vanished-01"):
        purchase = facts(key, asset=test_usdc.address, pay_to=payee, payer=funded_wallet.address)
        reservation = reserve_now(db, setup.agent_id, purchase, now)
        assert reservation.intent is not None
        with db.write() as session:
            rows.append(
                update_intent(
                    session,
                    OPERATOR,
                    intent_id=reservation.intent.id,
                    to=IntentStatus.SUBMITTED,
                    now=now,
                    event="x",
                )
            )
    landed, vanished = rows
    transfer_with_authorization(anvil, test_usdc, funded_wallet, landed)

    chain = ChainService({"eip155:84532": anvil.rpc_url})
    early = ExpireAuthorizations(db=db, chain=chain, clock=FrozenClock(now))
    assert await early.run_once() == 0  # nothing has lapsed yet: nothing is decided
    late = FrozenClock(datetime.fromtimestamp(vanished.valid_before, UTC) + timedelta(seconds=61))
    job = ExpireAuthorizations(db=db, chain=chain, clock=late)
    assert await job.run_once() == 2
    await chain.aclose()
    with db.read() as session:
        after_landed = session.get(PaymentIntent, landed.id)
        after_vanished = session.get(PaymentIntent, vanished.id)
    assert after_landed is not None
    assert after_vanished is not None
    assert after_landed.status == "settled"
    assert after_landed.tx_hash is not None
    assert (after_vanished.status, after_vanished.failure_code) == (
        "expired",
        "not_settled_before_valid_before",
    )
    assert test_usdc.balance_of(payee) == landed.amount_atomic
