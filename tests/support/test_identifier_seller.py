"""The payment-identifier seller behaves as the extension's specification says, with no Paywarden
code: a buyer built by hand from the protocol pays once, its repeats under the same id are
answered from the seller's record without a second charge, and the same id with another payment
is 409 Conflict. Real chain, the x402 SDK's own seller and facilitator."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.support.chain import TestToken
from tests.support.fixtures_chain import (  # noqa: F401 (pytest finds fixtures by their registered names)
    FundedWallet,
    fixture_anvil,
    fixture_funded_wallet,
    fixture_identifier_seller,
    fixture_test_usdc,
)
from tests.support.seller import Seller
from tests.support.x402_wire import PAYMENT_REQUIRED, PAYMENT_SIGNATURE, decode_header, sign_exact_payment

pytestmark = pytest.mark.chain
TIMEOUT_S = 30
PREMIUM = 10_000


def _with_id(signed_payload: dict[str, Any], declared: dict[str, Any], identifier: str) -> str:
    extension = declared["payment-identifier"]
    payload = {
        **signed_payload,
        "extensions": {"payment-identifier": {**extension, "info": {**extension["info"], "id": identifier}}},
    }
    return base64.b64encode(json.dumps(payload).encode()).decode()


def _challenge(seller: Seller, path: str) -> dict[str, Any]:
    asked = httpx.get(seller.url(path), timeout=TIMEOUT_S)
    assert asked.status_code == 402
    return decode_header(asked.headers[PAYMENT_REQUIRED])


def test_one_id_is_charged_once_and_another_payment_under_it_is_a_conflict(
    identifier_seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    seller, ledger = identifier_seller, identifier_seller.identifiers
    assert ledger is not None
    required = _challenge(seller, "/premium")
    assert required["extensions"]["payment-identifier"]["info"] == {"required": False}
    identifier = "pay_harness_" + funded_wallet.address[2:18].lower()
    before = test_usdc.balance_of(funded_wallet.address)

    first = sign_exact_payment(required, funded_wallet.private_key)
    header = _with_id(first.payload, required["extensions"], identifier)
    paid = httpx.get(seller.url("/premium"), headers={PAYMENT_SIGNATURE: header}, timeout=TIMEOUT_S)
    assert paid.status_code == 200, paid.text
    assert test_usdc.balance_of(funded_wallet.address) == before - PREMIUM

    # The same header again, and a second signature of the same purchase under the same id: both
    # are answered from the record, and neither is charged.
    again = httpx.get(seller.url("/premium"), headers={PAYMENT_SIGNATURE: header}, timeout=TIMEOUT_S)
    resigned = _with_id(
        sign_exact_payment(required, funded_wallet.private_key).payload, required["extensions"], identifier
    )
    twice = httpx.get(seller.url("/premium"), headers={PAYMENT_SIGNATURE: resigned}, timeout=TIMEOUT_S)
    assert (again.status_code, twice.status_code) == (200, 200)
    assert again.json() == paid.json()
    assert test_usdc.balance_of(funded_wallet.address) == before - PREMIUM
    assert (ledger.arrivals[identifier], ledger.settlements[identifier]) == (3, 1)

    # Another payment (another price, on another route) under the same id: 409, nothing moves.
    report = _challenge(seller, "/report")
    other = _with_id(
        sign_exact_payment(report, funded_wallet.private_key).payload, report["extensions"], identifier
    )
    conflict = httpx.get(seller.url("/report"), headers={PAYMENT_SIGNATURE: other}, timeout=TIMEOUT_S)
    assert conflict.status_code == 409
    assert test_usdc.balance_of(funded_wallet.address) == before - PREMIUM
    assert ledger.conflicts[identifier] == 1

    # Without an id, the seller is the SDK's plain seller: a repeat is refused, not served again.
    plain = sign_exact_payment(required, funded_wallet.private_key)
    assert (
        httpx.get(
            seller.url("/premium"), headers={PAYMENT_SIGNATURE: plain.header}, timeout=TIMEOUT_S
        ).status_code
        == 200
    )
    repeat = httpx.get(seller.url("/premium"), headers={PAYMENT_SIGNATURE: plain.header}, timeout=TIMEOUT_S)
    assert repeat.status_code == 402
    assert test_usdc.balance_of(funded_wallet.address) == before - 2 * PREMIUM
