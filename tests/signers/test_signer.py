"""The signer signs an EIP-3009 transfer of the network's USDC for an intent the ledger authorised,
exactly as the intent says, and refuses anything else with `sign_refused` and its reason."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from server.signers.base import PaymentSigner
from server.signers.errors import RefusalReason, SignRefused
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.signers.local_key import LocalKeySigner
from server.x402.transfer_authorization import derive_nonce
from tests.support.clocks import frozen_clock, written

pytestmark = pytest.mark.anyio

KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
PAYER = str(Account.from_key(KEY).address)
NETWORK = "eip155:84532"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
OTHER_TOKEN = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
OTHER_PAYEE = "0x1111111111111111111111111111111111111111"
NOW = written(2026, 12, 4, 12)
NOW_UNIX = int(NOW.timestamp())
ASSETS = {NETWORK: USDC, "eip155:8453": OTHER_TOKEN}

INTENT = AuthorisedIntent(
    id="intent_01",
    status="authorized",
    network=NETWORK,
    asset=USDC,
    pay_to=PAYEE,
    amount_atomic=10_000,
    payer=PAYER,
    nonce=derive_nonce("intent_01"),
    valid_after=NOW_UNIX - 60,
    valid_before=NOW_UNIX + 60,
)
REQUEST = TransferRequest(
    network=NETWORK,
    asset=USDC,
    pay_to=PAYEE,
    amount_atomic=10_000,
    domain_name="USDC",
    domain_version="2",
)


class CountingSigner(LocalKeySigner):
    """A local key that counts how often its key is used."""

    signed = 0

    async def _sign_typed_data(self, typed: dict[str, Any]) -> str:
        self.signed += 1
        return await super()._sign_typed_data(typed)


def _signer() -> CountingSigner:
    return CountingSigner(KEY, usdc_by_network=ASSETS, clock=frozen_clock(NOW))


def _recovered(typed: dict[str, Any], signature: str) -> str:
    return str(Account.recover_message(encode_typed_data(full_message=typed), signature=signature))


async def test_it_signs_the_intents_transfer_of_the_configured_usdc() -> None:
    signer = _signer()

    signed = await signer.sign_payment(INTENT, REQUEST)

    authorization = signed.authorization
    assert authorization.payer == PAYER
    assert authorization.pay_to == PAYEE
    assert authorization.value == 10_000
    assert (authorization.valid_after, authorization.valid_before) == (NOW_UNIX - 60, NOW_UNIX + 60)
    assert authorization.nonce == derive_nonce("intent_01")
    typed = {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "TransferWithAuthorization": [
                {"name": "from", "type": "address"},
                {"name": "to", "type": "address"},
                {"name": "value", "type": "uint256"},
                {"name": "validAfter", "type": "uint256"},
                {"name": "validBefore", "type": "uint256"},
                {"name": "nonce", "type": "bytes32"},
            ],
        },
        "primaryType": "TransferWithAuthorization",
        "domain": {"name": "USDC", "version": "2", "chainId": 84532, "verifyingContract": USDC},
        "message": {
            "from": PAYER,
            "to": PAYEE,
            "value": 10_000,
            "validAfter": NOW_UNIX - 60,
            "validBefore": NOW_UNIX + 60,
            "nonce": bytes.fromhex(derive_nonce("intent_01")[2:]),
        },
    }
    # The signature is over exactly that message, by the wallet's key.
    assert _recovered(typed, signed.signature) == PAYER
    assert signer.signed == 1


async def test_the_window_may_be_300_seconds_and_start_90_seconds_back() -> None:
    # 60 s of clock skew (as the ledger sets it) plus 30 s between the reservation and signing.
    edge = dataclasses.replace(INTENT, valid_after=NOW_UNIX - 90, valid_before=NOW_UNIX + 210)

    signed = await _signer().sign_payment(edge, REQUEST)

    assert signed.authorization.valid_before - signed.authorization.valid_after == 300


REFUSALS = [
    pytest.param({"status": "created"}, {}, RefusalReason.INTENT_NOT_AUTHORISED, id="held-intent"),
    pytest.param({"status": "submitted"}, {}, RefusalReason.INTENT_NOT_AUTHORISED, id="already-submitted"),
    pytest.param({"status": "failed"}, {}, RefusalReason.INTENT_NOT_AUTHORISED, id="failed-intent"),
    pytest.param({"nonce": "0x" + "ab" * 32}, {}, RefusalReason.NONCE_NOT_DERIVED, id="foreign-nonce"),
    pytest.param(
        {"nonce": derive_nonce("intent_02")}, {}, RefusalReason.NONCE_NOT_DERIVED, id="another-intents-nonce"
    ),
    pytest.param({}, {"network": "eip155:8453"}, RefusalReason.NETWORK_MISMATCH, id="another-network"),
    pytest.param(
        {"network": "eip155:1"},
        {"network": "eip155:1"},
        RefusalReason.NETWORK_NOT_CONFIGURED,
        id="network-without-usdc",
    ),
    pytest.param({}, {"asset": OTHER_TOKEN}, RefusalReason.ASSET_NOT_USDC, id="offer-for-another-token"),
    pytest.param(
        {"asset": OTHER_TOKEN},
        {"asset": OTHER_TOKEN},
        RefusalReason.ASSET_NOT_USDC,
        id="intent-for-another-token",
    ),
    pytest.param({}, {"amount_atomic": 10_001}, RefusalReason.AMOUNT_MISMATCH, id="larger-amount"),
    pytest.param({}, {"amount_atomic": 9_999}, RefusalReason.AMOUNT_MISMATCH, id="smaller-amount"),
    pytest.param({"amount_atomic": 0}, {"amount_atomic": 0}, RefusalReason.AMOUNT_MISMATCH, id="zero-amount"),
    pytest.param({}, {"pay_to": OTHER_PAYEE}, RefusalReason.PAYEE_MISMATCH, id="another-payee"),
    pytest.param({"payer": OTHER_PAYEE}, {}, RefusalReason.PAYER_MISMATCH, id="another-wallets-intent"),
    pytest.param(
        {"valid_after": NOW_UNIX - 60, "valid_before": NOW_UNIX + 241},
        {},
        RefusalReason.WINDOW_TOO_LONG,
        id="window-of-301-seconds",
    ),
    pytest.param(
        {"valid_after": NOW_UNIX - 10, "valid_before": NOW_UNIX + 86_400},
        {},
        RefusalReason.WINDOW_TOO_LONG,
        id="window-of-a-day",
    ),
    pytest.param(
        {"valid_after": NOW_UNIX - 91, "valid_before": NOW_UNIX + 60},
        {},
        RefusalReason.WINDOW_IN_PAST,
        id="starts-91-seconds-back",
    ),
    pytest.param(
        {"valid_after": NOW_UNIX - 60, "valid_before": NOW_UNIX},
        {},
        RefusalReason.WINDOW_ENDED,
        id="window-over",
    ),
]


@pytest.mark.parametrize(("intent_change", "request_change", "reason"), REFUSALS)
async def test_it_refuses_what_the_ledger_did_not_authorise(
    intent_change: dict[str, Any], request_change: dict[str, Any], reason: RefusalReason
) -> None:
    signer = _signer()
    intent = dataclasses.replace(INTENT, **intent_change)
    request = dataclasses.replace(REQUEST, **request_change)

    with pytest.raises(SignRefused) as refused:
        await signer.sign_payment(intent, request)

    assert refused.value.reason == reason
    assert refused.value.as_dict() == {
        "code": "sign_refused",
        "message": SignRefused.message,
        "reason": str(reason),
        "intentId": intent.id,
    }
    assert signer.signed == 0  # the key was never used


async def test_addresses_compare_without_their_checksum_case() -> None:
    request = dataclasses.replace(REQUEST, asset=USDC.lower(), pay_to=PAYEE.lower())

    signed = await _signer().sign_payment(INTENT, request)

    assert signed.authorization.pay_to == PAYEE


def test_no_signer_signs_typed_data_it_is_handed() -> None:
    public = {name for name in dir(LocalKeySigner) if not name.startswith("_")}
    assert public == {"address", "mode", "sign_payment"}
    assert {name for name in dir(PaymentSigner) if not name.startswith("_")} == {"address", "sign_payment"}
