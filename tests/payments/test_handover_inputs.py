"""pay_x402's and report_receipt's input guards: each refusal is invalid_input with its stable
reason, before anything is sent or recorded."""

from __future__ import annotations

from typing import Any

import pytest

from server.kit.errors import InvalidInput
from server.payments.inputs import validate_pay_x402, validate_report_receipt
from tests.x402.test_matching import offer, v1_offer

BEARER = "pw_at_" + "B" * 43
OFFER = offer()
V2 = {
    "url": "https://api.example.com/premium",
    "x402Version": 2,
    "accepts": [OFFER],
    "resource": {"url": "https://api.example.com/premium"},
}
V1_OFFER = v1_offer()
RECEIPT = "eyJzdWNjZXNzIjp0cnVlfQ=="  # base64 of {"success":true}


def pay(arguments: dict[str, Any]) -> Any:
    return validate_pay_x402(
        arguments, bearer=BEARER, public_host="paywarden.example.com", allow_private_hosts=False
    )


def refused(check: Any, arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as caught:
        check(arguments)
    return caught.value.reason


def test_a_402_as_received_is_read_like_a_sellers() -> None:
    given = pay({**V2, "method": "POST", "body": '{"q": 1}', "idempotencyKey": "key-0001"})
    assert given.request.method == "POST"
    assert given.idempotency_key == "key-0001"
    assert given.claimed.x402_version == 2
    assert given.claimed.resource_url == "https://api.example.com/premium"
    assert [offer.amount for offer in given.claimed.offers] == ["10000"]
    assert given.with_key("key-0002").request.idempotency_key == "key-0002"

    v1 = pay({"url": V2["url"], "x402Version": 1, "accepts": [V1_OFFER]})
    assert (v1.claimed.x402_version, v1.claimed.offers[0].resource_url) == (1, V1_OFFER["resource"])


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"x402Version": 3}, "invalid_x402_version"),
        ({"x402Version": True}, "invalid_x402_version"),
        ({"x402Version": "2"}, "invalid_x402_version"),
        ({"x402Version": None}, "invalid_x402_version"),
        ({"accepts": []}, "invalid_accepts"),
        ({"accepts": None}, "invalid_accepts"),
        ({"accepts": {"0": OFFER}}, "invalid_accepts"),
        ({"accepts": [OFFER, "exact"]}, "invalid_accepts"),
        ({"accepts": [OFFER] * 65}, "invalid_accepts"),
        ({"accepts": [{**OFFER, "extra": {"pad": "x" * 70_000}}]}, "invalid_accepts"),
        ({"resource": None}, "invalid_resource"),
        ({"resource": "https://api.example.com/premium"}, "invalid_resource"),
        ({"resource": {"description": "no url"}}, "invalid_resource"),
        ({"x402Version": 1, "accepts": [V1_OFFER]}, "invalid_resource"),  # v1 has no resource block
        # fetch_paid's own checks come first.
        ({"url": "http://api.example.com/premium"}, "https_required"),
        ({"headers": {"X-PAYMENT": "forged"}}, "reserved_header"),
        ({"idempotencyKey": "short"}, "invalid_idempotency_key"),
    ],
)
def test_what_is_not_a_402_as_received_is_refused(changes: dict[str, Any], reason: str) -> None:
    assert refused(pay, {**V2, **changes}) == reason


def test_a_receipt_names_one_payment_and_carries_the_header_as_received() -> None:
    report = validate_report_receipt(
        {"idempotencyKey": "key-0001", "paymentResponse": RECEIPT}, bearer=BEARER
    )
    assert (report.idempotency_key, report.intent_id, report.payment_response) == ("key-0001", None, RECEIPT)
    by_id = validate_report_receipt({"intentId": "pi_" + "a" * 20, "paymentResponse": RECEIPT}, bearer=BEARER)
    assert by_id.intent_id == "pi_" + "a" * 20
    # A transaction hash is shaped like a wallet key, and a settlement answer may name one.
    plain = '{"success":true,"transaction":"0x' + "ab" * 32 + '"}'
    assert validate_report_receipt({"intentId": "pi_x", "paymentResponse": plain}, bearer=BEARER)


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"paymentResponse": RECEIPT}, "payment_reference"),
        ({"idempotencyKey": "key-0001", "intentId": "pi_x", "paymentResponse": RECEIPT}, "payment_reference"),
        ({"intentId": "intent-1", "paymentResponse": RECEIPT}, "payment_reference"),
        ({"idempotencyKey": "k", "paymentResponse": RECEIPT}, "invalid_idempotency_key"),
        ({"idempotencyKey": "key-0001"}, "invalid_payment_response"),
        ({"idempotencyKey": "key-0001", "paymentResponse": ""}, "invalid_payment_response"),
        ({"idempotencyKey": "key-0001", "paymentResponse": "a" * 4097}, "invalid_payment_response"),
        ({"idempotencyKey": "key-0001", "paymentResponse": "ok\r\nX-Evil: 1"}, "invalid_payment_response"),
        ({"idempotencyKey": "key-0001", "paymentResponse": 7}, "invalid_payment_response"),
        ({"idempotencyKey": "key-0001", "paymentResponse": "token " + BEARER}, "contains_credential"),
        ({"idempotencyKey": "key-0001", "paymentResponse": "pw_rt_" + "C" * 40}, "contains_credential"),
    ],
)
def test_what_cannot_be_a_receipt_is_refused(arguments: dict[str, Any], reason: str) -> None:
    assert refused(lambda given: validate_report_receipt(given, bearer=BEARER), arguments) == reason
