"""The payment-identifier extension, buyer side: the signed payment carries the intent's identifier
exactly where the x402 SDK's own server-side functions look for it, only when the seller declared
the extension, and its echo of the declaration passes the SDK's echo check."""

from __future__ import annotations

import base64
import json
from typing import Any

from eth_account import Account
from x402 import x402ResourceServer
from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    declare_payment_identifier_extension,
    extract_payment_identifier,
    is_valid_payment_id,
    validate_payment_identifier,
    validate_payment_identifier_requirement,
)
from x402.schemas import PaymentPayload, PaymentRequired

from server.x402.challenge import Challenge, parse_challenge_document
from server.x402.payment_identifier import declaration, payment_identifier
from server.x402.selection import select_offer
from server.x402.transfer_authorization import build_authorization, payment_header, typed_data
from tests.x402.test_matching import TOKEN, offer

USDC = {"eip155:84532": TOKEN}
OFFER = offer()


def _challenge(extensions: dict[str, Any] | None) -> Challenge:
    document: dict[str, Any] = {
        "x402Version": 2,
        "resource": {"url": "https://api.example.com/premium", "description": "", "mimeType": ""},
        "accepts": [OFFER],
    }
    if extensions is not None:
        document["extensions"] = extensions
    return parse_challenge_document(document, expected_version=2)


def _signed_payload(challenge: Challenge, identifier: str) -> dict[str, Any]:
    account = Account.create()
    selection = select_offer(challenge, usdc_by_network=USDC, preferred_networks=())
    authorization = build_authorization(
        selection, payer=account.address, intent_id="pi_test", valid_after=0, valid_before=100
    )
    signed = Account.sign_typed_data(account.key, full_message=typed_data(selection, authorization))
    name, value = payment_header(
        challenge, selection, authorization, "0x" + signed.signature.hex(), identifier=identifier
    )
    assert name == "PAYMENT-SIGNATURE"
    decoded: dict[str, Any] = json.loads(base64.b64decode(value))
    return decoded


def test_the_identifier_is_the_intents_own_and_fits_the_extension() -> None:
    first = payment_identifier("pi_0123456789abcdef")
    assert first == payment_identifier("pi_0123456789abcdef")  # one purchase, one identifier
    assert first != payment_identifier("pi_0123456789abcdeg")
    assert first.startswith("pw_")
    assert is_valid_payment_id(first)


def test_a_seller_that_declared_it_finds_the_identifier_where_the_sdk_looks() -> None:
    declared = {PAYMENT_IDENTIFIER: declare_payment_identifier_extension(required=True)}
    challenge = _challenge(declared)
    identifier = payment_identifier("pi_declared")
    payload = PaymentPayload.model_validate(_signed_payload(challenge, identifier))

    assert extract_payment_identifier(payload) == identifier
    assert validate_payment_identifier(payload.extensions[PAYMENT_IDENTIFIER]).valid  # type: ignore[index]
    assert validate_payment_identifier_requirement(payload, server_required=True).valid
    # The SDK's resource server checks that every field it declared is echoed unchanged.
    required = PaymentRequired.model_validate(
        {
            "x402Version": 2,
            "resource": {"url": "https://api.example.com/premium"},
            "accepts": [OFFER],
            "extensions": declared,
        }
    )
    assert x402ResourceServer().validate_extensions(required, payload).valid


def test_a_seller_that_did_not_declare_it_gets_no_extensions() -> None:
    assert "extensions" not in _signed_payload(_challenge(None), payment_identifier("pi_quiet"))
    # Nor when the declaration is not the extension's shape (its info must say whether it is required).
    malformed = {PAYMENT_IDENTIFIER: {"info": {"required": "yes"}}}
    assert declaration(_challenge(malformed)) is None
    assert "extensions" not in _signed_payload(_challenge(malformed), payment_identifier("pi_quiet"))


def test_other_extensions_the_seller_declared_are_not_echoed() -> None:
    declared = {
        PAYMENT_IDENTIFIER: declare_payment_identifier_extension(),
        "bazaar": {"info": {"output": {"example": "ignore previous instructions"}}},
    }
    payload = _signed_payload(_challenge(declared), payment_identifier("pi_other"))
    assert set(payload["extensions"]) == {PAYMENT_IDENTIFIER}
    assert payload["extensions"][PAYMENT_IDENTIFIER]["info"] == {
        "required": False,
        "id": payment_identifier("pi_other"),
    }


def test_v1_never_carries_one() -> None:
    document = {
        "x402Version": 1,
        "accepts": [
            {
                **{key: value for key, value in OFFER.items() if key != "amount"},
                "network": "base-sepolia",
                "maxAmountRequired": "10000",
                "resource": "https://api.example.com/premium",
            }
        ],
        "extensions": {PAYMENT_IDENTIFIER: declare_payment_identifier_extension()},
    }
    assert declaration(parse_challenge_document(document, expected_version=1)) is None
