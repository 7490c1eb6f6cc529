"""An agent's copy of a 402 matches the seller's own only when it names the same terms, and the
first difference is named: the offer about to be paid before the rest."""

from __future__ import annotations

from typing import Any

import pytest

from server.x402.challenge import Challenge, parse_challenge_document
from server.x402.matching import Mismatch, mismatch

TOKEN = "0x" + "12" * 20
PAY_TO = "0x" + "34" * 20
OTHER = "0x" + "56" * 20
RESOURCE = {
    "url": "https://api.example.com/premium",
    "description": "premium",
    "mimeType": "application/json",
}


def offer(**changes: Any) -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "eip155:84532",
        "amount": "10000",
        "asset": TOKEN,
        "payTo": PAY_TO,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
        **changes,
    }


def v2(*offers: dict[str, Any], resource: dict[str, Any] | None = None) -> Challenge:
    document = {"x402Version": 2, "resource": resource or RESOURCE, "accepts": list(offers)}
    return parse_challenge_document(document, expected_version=2)


def v1(*offers: dict[str, Any]) -> Challenge:
    return parse_challenge_document({"x402Version": 1, "accepts": list(offers)}, expected_version=1)


def v1_offer(**changes: Any) -> dict[str, Any]:
    entry = {key: value for key, value in offer().items() if key != "amount"}
    return {
        **entry,
        "network": "base-sepolia",
        "maxAmountRequired": "10000",
        "resource": "https://api.example.com/premium",
        **changes,
    }


def test_the_same_terms_match_whatever_else_differs() -> None:
    fetched = v2(offer(), offer(network="eip155:8453", asset="0x" + "78" * 20))
    claimed = v2(
        # Another order, other descriptions and timeouts, addresses in another case: the same terms.
        offer(network="eip155:8453", asset="0x" + "78" * 20, description="cheap"),
        offer(payTo=PAY_TO.upper().replace("0X", "0x"), maxTimeoutSeconds=10, extra={}),
        resource={**RESOURCE, "description": "something else"},
    )
    assert mismatch(claimed, fetched, fetched.offers[0]) is None


@pytest.mark.parametrize(
    ("claimed_offer", "expected"),
    [
        (offer(amount="9999"), Mismatch.PRICE),
        (offer(amount="1"), Mismatch.PRICE),
        (offer(payTo=OTHER), Mismatch.PAY_TO),
        (offer(payTo=OTHER, amount="1"), Mismatch.PAY_TO),  # the payee is named before the price
        (offer(asset="0x" + "99" * 20), Mismatch.ASSET),
        (offer(network="eip155:8453"), Mismatch.NETWORK),
        (offer(scheme="upto"), Mismatch.SCHEME),
    ],
)
def test_the_offer_to_pay_must_be_among_the_agents(claimed_offer: dict[str, Any], expected: Mismatch) -> None:
    fetched = v2(offer())
    assert mismatch(v2(claimed_offer), fetched, fetched.offers[0]) == expected


def test_a_resource_version_or_list_of_offers_that_differs_is_named() -> None:
    fetched = v2(offer())
    paying = fetched.offers[0]
    assert mismatch(v2(offer(), resource={"url": "https://api.example.com/other"}), fetched, paying) == (
        Mismatch.RESOURCE
    )
    assert mismatch(v1(v1_offer()), fetched, paying) == Mismatch.X402_VERSION
    # An extra offer the seller does not make (here: cheaper, to someone else) is a difference too.
    assert mismatch(v2(offer(), offer(payTo=OTHER, amount="1")), fetched, paying) == Mismatch.OFFERS
    assert mismatch(v2(offer(), offer()), fetched, paying) == Mismatch.OFFERS
    assert mismatch(v2(), fetched, paying) == Mismatch.SCHEME  # nothing to pay at all


def test_v1_compares_each_offers_resource_and_network_as_written() -> None:
    fetched = v1(v1_offer())
    paying = fetched.offers[0]
    assert mismatch(v1(v1_offer()), fetched, paying) is None
    assert (
        mismatch(v1(v1_offer(resource="https://api.example.com/free")), fetched, paying) == Mismatch.RESOURCE
    )
    assert mismatch(v1(v1_offer(network="base")), fetched, paying) == Mismatch.NETWORK
    assert mismatch(v1(v1_offer(maxAmountRequired="1")), fetched, paying) == Mismatch.PRICE
