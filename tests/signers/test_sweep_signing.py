"""A sweep is signed through the same one method as a payment: an EIP-3009 transfer of the network's
USDC for an intent the ledger authorised. What a sweep adds: its payee is the agent's current
wallet, as read when it is signed, and nothing else; and the current wallet itself is never swept."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from server.signers.errors import RefusalReason, SignRefused
from server.signers.intents import AuthorisedIntent, IntentKind, TransferRequest
from server.x402.transfer_authorization import derive_nonce, transfer_typed_data
from tests.signers.test_signer import CountingSigner
from tests.support.clocks import frozen_clock, written

pytestmark = pytest.mark.anyio

RETIRED_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
RETIRED = str(Account.from_key(RETIRED_KEY).address)
CURRENT = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
THIEF = "0x1111111111111111111111111111111111111111"
NETWORK = "eip155:84532"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
NOW = written(2026, 12, 4, 12)
NOW_UNIX = int(NOW.timestamp())

SWEEP = AuthorisedIntent(
    id="sweep_01",
    status="authorized",
    network=NETWORK,
    asset=USDC,
    pay_to=CURRENT,
    amount_atomic=7_250_000,
    payer=RETIRED,
    nonce=derive_nonce("sweep_01"),
    valid_after=NOW_UNIX - 60,
    valid_before=NOW_UNIX + 240,
    kind=IntentKind.SWEEP,
    current_wallet=CURRENT,
)
REQUEST = TransferRequest(
    network=NETWORK,
    asset=USDC,
    pay_to=CURRENT,
    amount_atomic=7_250_000,
    domain_name="USDC",
    domain_version="2",
)


def _signer() -> CountingSigner:
    return CountingSigner(RETIRED_KEY, usdc_by_network={NETWORK: USDC}, clock=frozen_clock(NOW))


async def test_a_sweep_to_the_current_wallet_is_signed_like_a_payment() -> None:
    signer = _signer()

    signed = await signer.sign_payment(SWEEP, REQUEST)

    authorization = signed.authorization
    assert (authorization.payer, authorization.pay_to, authorization.value) == (RETIRED, CURRENT, 7_250_000)
    assert authorization.nonce == derive_nonce("sweep_01")
    typed = transfer_typed_data(
        authorization, domain_name="USDC", domain_version="2", chain_id=84532, verifying_contract=USDC
    )
    message = encode_typed_data(full_message=typed)
    assert Account.recover_message(message, signature=signed.signature) == RETIRED
    assert signer.signed == 1


SWEEP_REFUSALS = [
    pytest.param(
        {"pay_to": THIEF},
        {"pay_to": THIEF},
        RefusalReason.SWEEP_NOT_TO_CURRENT_WALLET,
        id="to-another-address",
    ),
    pytest.param(
        {"current_wallet": None}, {}, RefusalReason.SWEEP_NOT_TO_CURRENT_WALLET, id="no-current-wallet-named"
    ),
    pytest.param(
        {"current_wallet": THIEF}, {}, RefusalReason.SWEEP_NOT_TO_CURRENT_WALLET, id="rotated-again-since"
    ),
    pytest.param({}, {"pay_to": THIEF}, RefusalReason.PAYEE_MISMATCH, id="asked-for-another-payee"),
    pytest.param(
        {"pay_to": RETIRED, "current_wallet": RETIRED},
        {"pay_to": RETIRED},
        RefusalReason.SWEEP_OF_CURRENT_WALLET,
        id="sweeping-the-current-wallet",
    ),
    pytest.param(
        {"nonce": derive_nonce("sweep_02")}, {}, RefusalReason.NONCE_NOT_DERIVED, id="another-nonce"
    ),
    pytest.param({"status": "signed"}, {}, RefusalReason.INTENT_NOT_AUTHORISED, id="signed-already"),
    pytest.param({}, {"amount_atomic": 7_250_001}, RefusalReason.AMOUNT_MISMATCH, id="more-than-recorded"),
    pytest.param(
        {"valid_before": NOW_UNIX + 241}, {}, RefusalReason.WINDOW_TOO_LONG, id="window-over-300-seconds"
    ),
]


@pytest.mark.parametrize(("sweep_change", "request_change", "reason"), SWEEP_REFUSALS)
async def test_a_sweep_anywhere_but_the_current_wallet_is_refused(
    sweep_change: dict[str, Any], request_change: dict[str, Any], reason: RefusalReason
) -> None:
    signer = _signer()

    with pytest.raises(SignRefused) as refused:
        await signer.sign_payment(
            dataclasses.replace(SWEEP, **sweep_change), dataclasses.replace(REQUEST, **request_change)
        )

    assert refused.value.reason == reason
    assert refused.value.as_dict()["intentId"] == "sweep_01"
    assert signer.signed == 0


async def test_a_payment_names_no_current_wallet_and_is_not_bound_to_one() -> None:
    payment = dataclasses.replace(
        SWEEP, id="intent_01", nonce=derive_nonce("intent_01"), kind=IntentKind.PAYMENT
    )
    payment = dataclasses.replace(payment, pay_to=THIEF, current_wallet=None)

    signed = await _signer().sign_payment(payment, dataclasses.replace(REQUEST, pay_to=THIEF))

    assert signed.authorization.pay_to == THIEF
