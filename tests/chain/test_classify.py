"""The pure parts of chain truth: pairing authorisations with transfers, judging a movement against
the ledger, and matching a settlement's transfer to what was signed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from server.chain.evidence import (
    AUTHORIZATION_USED_TOPIC,
    TRANSFER_TOPIC,
    ExpectedTransfer,
    _matching_transfer,
    address_topic,
)
from server.chain.movements import pair_authorizations
from server.payments.settlement.watch import classify_transfer

TOKEN = "0x" + "aa" * 20
WALLET = "0x" + "bb" * 20
PAYEE = "0x" + "cc" * 20
OTHER = "0x" + "dd" * 20
NONCE_A, NONCE_B = "0x" + "01" * 32, "0x" + "02" * 32


def used(index: int, nonce: str, authorizer: str = WALLET) -> dict[str, Any]:
    return {
        "address": TOKEN,
        "logIndex": hex(index),
        "topics": [AUTHORIZATION_USED_TOPIC, address_topic(authorizer), nonce],
        "transactionHash": "0x" + "ee" * 32,
        "blockNumber": "0x10",
    }


def transfer(index: int, to: str, value: int, sender: str = WALLET) -> dict[str, Any]:
    return {
        "address": TOKEN,
        "logIndex": hex(index),
        "topics": [TRANSFER_TOPIC, address_topic(sender), address_topic(to)],
        "data": hex(value),
        "transactionHash": "0x" + "ee" * 32,
        "blockNumber": "0x10",
    }


def test_each_transfer_takes_the_authorisation_just_before_it() -> None:
    logs = [
        transfer(5, PAYEE, 1),
        used(0, NONCE_A),
        transfer(1, PAYEE, 2),
        used(2, NONCE_B),
        transfer(3, OTHER, 3),
    ]
    assert pair_authorizations(logs, asset=TOKEN, wallet=WALLET) == {1: NONCE_A, 3: NONCE_B, 5: None}


def test_other_authorizers_and_tokens_do_not_count() -> None:
    foreign = dict(used(0, NONCE_A), address="0x" + "99" * 20)
    logs = [foreign, used(1, NONCE_B, authorizer=OTHER), transfer(2, PAYEE, 1)]
    assert pair_authorizations(logs, asset=TOKEN, wallet=WALLET) == {2: None}


def intent(**fields: Any) -> Any:
    base = {"id": "pi_1", "pay_to": PAYEE, "amount_atomic": 10_000, "status": "settled", "failure_code": None}
    return SimpleNamespace(**{**base, **fields})


@pytest.mark.parametrize(
    ("nonce", "row", "kind"),
    [
        (None, None, "transfer_without_authorization"),
        (NONCE_A, None, "unknown_nonce"),
        (NONCE_A, intent(pay_to=OTHER), "pay_to_mismatch"),
        (NONCE_A, intent(amount_atomic=1), "amount_mismatch"),
        (NONCE_A, intent(status="authorized"), "payment_not_sent"),
        (NONCE_A, intent(status="failed", failure_code="seller_unreachable"), "payment_not_sent"),
        (
            NONCE_A,
            intent(status="failed", failure_code="payment_rejected_by_seller"),
            "settled_after_refusal",
        ),
        (NONCE_A, intent(), None),
        (NONCE_A, intent(status="failed", failure_code="payment_not_completed"), None),  # may still settle
        (NONCE_A, intent(status="submitted", failure_code="answer_lost"), None),
        (NONCE_A, intent(pay_to=PAYEE.upper().replace("0X", "0x")), None),  # address case is not a difference
    ],
)
def test_a_movement_is_judged_against_the_ledger(nonce: str | None, row: Any, kind: str | None) -> None:
    assert classify_transfer(to=PAYEE, value=10_000, nonce=nonce, intent=row)[0] == kind


def test_a_settlement_must_match_payee_and_amount() -> None:
    expected = ExpectedTransfer(asset=TOKEN, payer=WALLET, pay_to=PAYEE, amount_atomic=10_000, nonce=NONCE_A)
    assert _matching_transfer([used(0, NONCE_A), transfer(1, PAYEE, 10_000)], expected).settled
    wrong_payee = _matching_transfer([used(0, NONCE_A), transfer(1, OTHER, 10_000)], expected)
    assert (wrong_payee.found, wrong_payee.settled, wrong_payee.mismatch) == (True, False, "pay_to")
    wrong_amount = _matching_transfer([used(0, NONCE_A), transfer(1, PAYEE, 9_999)], expected)
    assert (wrong_amount.mismatch, wrong_amount.actual_amount) == ("amount", 9_999)
    assert _matching_transfer([used(0, NONCE_A)], expected).mismatch == "no_transfer"
