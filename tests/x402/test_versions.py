"""x402 v1 and v2 challenges are read into the same offers, chosen the same way, and paid in the
challenge's own header format."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from eth_account import Account

from server.x402.challenge import ChallengeError, decode_payment_required, decode_v1_body, host_of
from server.x402.selection import NoPayableEntry, select_offer
from server.x402.transfer_authorization import build_authorization, payment_header, typed_data

TOKEN = "0x" + "12" * 20
PAY_TO = "0x" + "34" * 20
USDC = {"eip155:84532": TOKEN, "eip155:8453": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"}


def v1_document(**offer: Any) -> dict[str, Any]:
    entry = {
        "scheme": "exact",
        "network": "base-sepolia",
        "maxAmountRequired": "10000",
        "resource": "https://api.example.com/premium",
        "description": "premium",
        "mimeType": "application/json",
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "asset": TOKEN,
        "extra": {"name": "USDC", "version": "2"},
        **offer,
    }
    return {"x402Version": 1, "error": "X-PAYMENT header is required", "accepts": [entry]}


def v2_header(**offer: Any) -> str:
    entry = {
        "scheme": "exact",
        "network": "eip155:84532",
        "amount": "10000",
        "asset": TOKEN,
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
        **offer,
    }
    document = {"x402Version": 2, "resource": {"url": "https://api.example.com/premium"}, "accepts": [entry]}
    return base64.b64encode(json.dumps(document).encode()).decode()


def test_a_v1_body_reads_like_a_v2_header() -> None:
    v1 = decode_v1_body(json.dumps(v1_document()).encode())
    v2 = decode_payment_required(v2_header())
    for challenge in (v1, v2):
        selection = select_offer(challenge, usdc_by_network=USDC, preferred_networks=("eip155:84532",))
        assert (selection.network, selection.amount_atomic, selection.pay_to) == (
            "eip155:84532",
            10_000,
            PAY_TO,
        )
        assert (selection.domain_name, selection.domain_version) == ("USDC", "2")
    assert v1.x402_version == 1
    assert v1.offers[0].resource_url == "https://api.example.com/premium"
    assert v2.offers[0].resource_url is None
    assert v2.resource_url == "https://api.example.com/premium"


@pytest.mark.parametrize(
    ("offer", "reason"),
    [
        ({"network": "polygon"}, "unsupported_network"),
        ({"network": "eip155:84532"}, "unsupported_network"),  # v1 names networks, it does not use CAIP-2
        ({"scheme": "upto"}, "unsupported_scheme"),
        ({"maxAmountRequired": "0.01"}, "amount_not_whole"),
        ({"asset": "0x" + "99" * 20}, "unsupported_asset"),
    ],
)
def test_v1_offers_that_cannot_be_paid_say_why(offer: dict[str, Any], reason: str) -> None:
    challenge = decode_v1_body(json.dumps(v1_document(**offer)).encode())
    with pytest.raises(NoPayableEntry) as caught:
        select_offer(challenge, usdc_by_network=USDC, preferred_networks=("eip155:84532",))
    assert caught.value.reason == reason


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"pay me",
        b"[]",
        json.dumps({"x402Version": 2, "accepts": []}).encode(),
        json.dumps({"x402Version": True, "accepts": []}).encode(),  # true == 1 in Python, not here
        json.dumps({"x402Version": 1}).encode(),
        b"{" * 70_000,
    ],
)
def test_unreadable_v1_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(ChallengeError):
        decode_v1_body(body)


def test_the_payment_header_follows_the_challenges_version() -> None:
    account = Account.create()
    for challenge, name in (
        (decode_v1_body(json.dumps(v1_document()).encode()), "X-PAYMENT"),
        (decode_payment_required(v2_header()), "PAYMENT-SIGNATURE"),
    ):
        selection = select_offer(challenge, usdc_by_network=USDC, preferred_networks=("eip155:84532",))
        authorization = build_authorization(
            selection, payer=account.address, intent_id="intent_x", valid_after=1, valid_before=100
        )
        signature = (
            "0x"
            + bytes(
                account.sign_typed_data(full_message=typed_data(selection, authorization)).signature
            ).hex()
        )
        header, value = payment_header(challenge, selection, authorization, signature)
        document = json.loads(base64.b64decode(value))
        assert header == name
        assert document["x402Version"] == challenge.x402_version
        assert document["payload"]["authorization"]["to"] == PAY_TO
        assert document["payload"]["authorization"]["value"] == "10000"
        if challenge.x402_version == 1:
            # v1: scheme and the seller's own network name at the top level, no echoed offer.
            assert (document["scheme"], document["network"]) == ("exact", "base-sepolia")
            assert "accepted" not in document
        else:
            assert document["accepted"] == challenge.offers[0].raw


def test_seller_texts_gather_every_free_text_field() -> None:
    document = v1_document(
        description="offer text", extra={"name": "USDC", "version": "2", "note": "extra text"}
    )
    challenge = decode_v1_body(json.dumps(document).encode())
    texts = challenge.seller_texts()
    assert "offer text" in texts
    assert "extra text" in texts
    assert "X-PAYMENT header is required" in texts


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://API.example.com./x", "api.example.com"),
        ("https://api.example.com:8443/x", "api.example.com"),
        ("not a url", None),
        ("https://[::1/x", None),
        (None, None),
    ],
)
def test_host_of_a_named_resource(url: str | None, host: str | None) -> None:
    assert host_of(url) == host
