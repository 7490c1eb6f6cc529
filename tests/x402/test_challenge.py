"""Decoding a seller's challenge, choosing the offer to pay, and building what gets signed."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from server.x402.challenge import ChallengeError, decode_payment_required
from server.x402.receipt import decode_payment_response
from server.x402.selection import NoPayableEntry, select_offer
from server.x402.transfer_authorization import (
    MAX_WINDOW_SECONDS,
    build_authorization,
    derive_nonce,
    encode_payment_signature,
    typed_data,
    validity_window,
)

BASE = "eip155:8453"
SEPOLIA = "eip155:84532"
USDC = {
    BASE: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    SEPOLIA: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
}
PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"


def offer(**overrides: Any) -> dict[str, Any]:
    base = {
        "scheme": "exact",
        "network": SEPOLIA,
        "asset": USDC[SEPOLIA],
        "amount": "10000",
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
    }
    base.update(overrides)
    return base


def header(*offers: dict[str, Any], **document: Any) -> str:
    body = {
        "x402Version": 2,
        "resource": {"url": "https://api.example.com/x"},
        "accepts": list(offers),
        **document,
    }
    return base64.b64encode(json.dumps(body).encode()).decode()


def test_decodes_a_v2_challenge_and_keeps_offers_verbatim() -> None:
    raw = offer(extra={"name": "USDC", "version": "2", "unknownField": [1, 2]})
    challenge = decode_payment_required(header(raw))
    assert challenge.x402_version == 2
    assert challenge.resource_url == "https://api.example.com/x"
    assert challenge.resource_host == "api.example.com"
    assert challenge.offers[0].raw == raw


@pytest.mark.parametrize(
    "value",
    [
        "not base64!!",
        base64.b64encode(b"not json").decode(),
        base64.b64encode(b"[1,2]").decode(),
        base64.b64encode(json.dumps({"x402Version": 1, "accepts": []}).encode()).decode(),
        base64.b64encode(json.dumps({"x402Version": 2}).encode()).decode(),
        "A" * 70_000,
    ],
)
def test_unreadable_challenges_are_refused(value: str) -> None:
    with pytest.raises(ChallengeError):
        decode_payment_required(value)


def test_selects_the_cheapest_payable_offer_on_the_agents_network() -> None:
    challenge = decode_payment_required(
        header(
            offer(network=BASE, asset=USDC[BASE], amount="500"),
            offer(amount="20000"),
            offer(amount="10000"),
            offer(scheme="upto", amount="1"),
        )
    )
    chosen = select_offer(challenge, usdc_by_network=USDC, preferred_networks=(SEPOLIA,))
    assert (chosen.network, chosen.amount_atomic) == (SEPOLIA, 10_000)
    assert chosen.chain_id == 84532


def test_an_offer_off_the_agents_networks_is_still_returned_for_the_policy_to_deny() -> None:
    challenge = decode_payment_required(header(offer(network=BASE, asset=USDC[BASE])))
    chosen = select_offer(challenge, usdc_by_network=USDC, preferred_networks=(SEPOLIA,))
    assert chosen.network == BASE


@pytest.mark.parametrize(
    ("offers", "reason"),
    [
        ([], "no_offers"),
        ([offer(scheme="upto")], "unsupported_scheme"),
        ([offer(network="solana:mainnet")], "unsupported_network"),
        ([offer(network="eip155:1")], "unsupported_network"),
        ([offer(asset="0x0000000000000000000000000000000000000001")], "unsupported_asset"),
        ([offer(amount="0.5")], "amount_not_whole"),
        ([offer(amount="0")], "amount_not_whole"),
        ([offer(amount=10000)], "amount_not_whole"),
        ([offer(payTo="nobody")], "invalid_pay_to"),
        ([offer(asset="0x" + "ab" * 20, extra={})], "unsupported_asset"),
        # The closest offer decides the reason: the network one got further than the scheme one.
        ([offer(scheme="upto"), offer(network="eip155:1")], "unsupported_network"),
    ],
)
def test_no_payable_entry_names_how_far_the_closest_offer_got(
    offers: list[dict[str, Any]], reason: str
) -> None:
    challenge = decode_payment_required(header(*offers))
    with pytest.raises(NoPayableEntry) as caught:
        select_offer(challenge, usdc_by_network=USDC, preferred_networks=(SEPOLIA,))
    assert caught.value.reason == reason


def test_a_custom_asset_without_its_eip712_domain_cannot_be_paid() -> None:
    token = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    challenge = decode_payment_required(header(offer(asset=token, extra={})))
    with pytest.raises(NoPayableEntry) as caught:
        select_offer(challenge, usdc_by_network={SEPOLIA: token}, preferred_networks=(SEPOLIA,))
    assert caught.value.reason == "missing_eip712_domain"


def test_real_usdc_without_extra_uses_its_known_domain() -> None:
    challenge = decode_payment_required(header(offer(network=BASE, asset=USDC[BASE], extra={})))
    chosen = select_offer(challenge, usdc_by_network=USDC, preferred_networks=(BASE,))
    assert (chosen.domain_name, chosen.domain_version) == ("USD Coin", "2")


def test_the_nonce_is_derived_from_the_intent() -> None:
    assert derive_nonce("pi_a") == derive_nonce("pi_a")
    assert derive_nonce("pi_a") != derive_nonce("pi_b")
    assert len(derive_nonce("pi_a")) == 66


@pytest.mark.parametrize("seller_timeout", [None, 1, 60, 300, 10_000])
def test_the_validity_window_never_exceeds_300_seconds(seller_timeout: int | None) -> None:
    after, before = validity_window(1_000_000, seller_timeout)
    assert before - after <= MAX_WINDOW_SECONDS
    assert after < 1_000_000 < before
    assert before - 1_000_000 >= 15


def test_the_signed_payload_echoes_the_offer_and_recovers_to_the_payer() -> None:
    account = Account.create()
    raw = offer()
    challenge = decode_payment_required(header(raw))
    chosen = select_offer(challenge, usdc_by_network=USDC, preferred_networks=(SEPOLIA,))
    after, before = validity_window(1_700_000_000, 60)
    authorization = build_authorization(
        chosen, payer=account.address, intent_id="pi_1", valid_after=after, valid_before=before
    )
    data = typed_data(chosen, authorization)
    signature = account.sign_typed_data(full_message=data).signature
    assert (
        Account.recover_message(encode_typed_data(full_message=data), signature=signature) == account.address
    )

    payload = json.loads(
        base64.b64decode(encode_payment_signature(challenge, chosen, authorization, "0x" + signature.hex()))
    )
    assert payload["x402Version"] == 2
    assert payload["accepted"] == raw
    assert payload["resource"] == {"url": "https://api.example.com/x"}
    assert payload["payload"]["authorization"] == {
        "from": account.address,
        "to": PAY_TO,
        "value": "10000",
        "validAfter": str(after),
        "validBefore": str(before),
        "nonce": derive_nonce("pi_1"),
    }


def test_a_window_longer_than_300_seconds_is_refused() -> None:
    chosen = select_offer(
        decode_payment_required(header(offer())), usdc_by_network=USDC, preferred_networks=(SEPOLIA,)
    )
    with pytest.raises(ValueError, match="300"):
        build_authorization(chosen, payer=PAY_TO, intent_id="pi_1", valid_after=0, valid_before=301)


def test_payment_response_is_decoded_and_only_well_formed_hashes_kept() -> None:
    tx = "0x" + "ab" * 32
    good = base64.b64encode(
        json.dumps({"success": True, "transaction": tx, "network": SEPOLIA}).encode()
    ).decode()
    receipt = decode_payment_response(good)
    assert receipt is not None
    assert (receipt.success, receipt.transaction) == (True, tx)
    bad_tx = base64.b64encode(json.dumps({"success": True, "transaction": "<script>"}).encode()).decode()
    assert decode_payment_response(bad_tx).transaction is None  # type: ignore[union-attr]
    failed = base64.b64encode(json.dumps({"success": False, "errorReason": "x" * 900}).encode()).decode()
    assert decode_payment_response(failed).error_reason == "x" * 500  # type: ignore[union-attr]
    assert decode_payment_response(None) is None
    assert decode_payment_response("%%%") is None
    assert decode_payment_response(base64.b64encode(b'{"success": "yes"}').decode()) is None
