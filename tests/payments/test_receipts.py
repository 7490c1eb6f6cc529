"""What a payment keeps of the seller's answer: digests and sizes of the bytes as received, the
media type reduced to its grammar, the settlement header of the protocol version, bounded."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import httpx

from server.kit.db import Database
from server.models import PaymentIntent
from server.payments import decisions
from server.payments.answer import MAX_PAYMENT_RESPONSE_CHARS, kept_of
from server.payments.ledger import terms_digest
from server.sellers.client import BODY_BROKEN, SellerRequest, SellerResponse
from server.sellers.urls import parse_target
from server.x402.challenge import Challenge, Offer
from tests.support.clocks import written
from tests.support.ledger import authorize_held_now, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member

URL = "https://api.example.com/v1/search"
NOW = written(2026, 12, 4, 12, 0)


def _answer(
    body: bytes, headers: dict[str, str], *, truncated: bool = False, error: str | None = None
) -> SellerResponse:
    return SellerResponse(
        status=200,
        headers=httpx.Headers(headers),
        body=body,
        truncated=truncated,
        target=parse_target(URL),
        request=SellerRequest("GET", URL),
        body_error=error,
    )


def _challenge(version: int) -> Challenge:
    return Challenge(x402_version=version, offers=(Offer({"scheme": "exact"}, version=version),))


def test_the_body_is_kept_as_its_digest_and_size_only() -> None:
    body = b'{"answer": 42}'
    kept = kept_of(_answer(body, {"content-type": "Application/JSON; charset=utf-8"}), _challenge(2))
    assert kept == {
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body_bytes": len(body),
        "body_truncated": False,
        "content_type": "application/json",
        "payment_response": None,
    }


def test_an_incomplete_body_is_hashed_as_received_and_says_so() -> None:
    cut = kept_of(_answer(b"abc", {}, truncated=True), _challenge(2))
    assert (cut["body_sha256"], cut["body_bytes"], cut["body_truncated"]) == (
        hashlib.sha256(b"abc").hexdigest(),
        3,
        True,
    )
    assert cut["content_type"] == "application/octet-stream"
    broken = kept_of(_answer(b"ab", {"content-type": "text/plain"}, error=BODY_BROKEN), _challenge(2))
    assert broken["body_truncated"] is True


def test_the_settlement_header_is_kept_as_received_and_bounded() -> None:
    header = "eyJzdWNjZXNzIjp0cnVlfQ=="
    assert kept_of(_answer(b"", {"PAYMENT-RESPONSE": header}), _challenge(2))["payment_response"] == header
    long = "A" * (MAX_PAYMENT_RESPONSE_CHARS + 100)
    kept = kept_of(_answer(b"", {"payment-response": long}), _challenge(2))["payment_response"]
    assert kept == long[:MAX_PAYMENT_RESPONSE_CHARS]
    # v2 reads only its own header; v1 reads X-PAYMENT-RESPONSE first.
    both = {"x-payment-response": "v1-header", "payment-response": "v2-header"}
    assert (
        kept_of(_answer(b"", {"x-payment-response": "v1-header"}), _challenge(2))["payment_response"] is None
    )
    assert kept_of(_answer(b"", both), _challenge(1))["payment_response"] == "v1-header"


def test_the_terms_digest_is_of_the_entry_as_canonical_json() -> None:
    entry = {
        "scheme": "exact",
        "payTo": "0x" + "1" * 40,
        "extra": {"version": "2", "name": "USDC"},
        "amount": "10",
    }
    reordered = dict(reversed(list(entry.items())))
    expected = hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert terms_digest(Offer(entry)) == terms_digest(Offer(reordered)) == expected
    assert terms_digest(Offer({**entry, "amount": "11"})) != expected


def test_a_held_payment_keeps_the_terms_it_is_finally_paid_under(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    member = make_member(db, setup.org_id, role="approver")
    asked = facts("terms-001")
    held = reserve_now(db, setup.agent_id, asked, NOW)
    assert held.kind == "held"
    assert held.approval is not None
    assert held.intent is not None
    assert held.intent.terms_sha256 == _digest(asked.selection.offer.raw)
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=held.approval.id,
            approve=True,
            member_ref=member,
            via="cli_break_glass",
            now=NOW,
        )
    # The seller's entry changed in what the approval does not bind (its timeout): the payment
    # keeps the entry it is paid under now.
    offer = Offer({**asked.selection.offer.raw, "maxTimeoutSeconds": 120})
    retried = replace(asked, selection=replace(asked.selection, offer=offer, max_timeout_seconds=120))
    done = authorize_held_now(db, setup.agent_id, held.intent.id, retried, NOW)
    assert done.kind == "authorized"
    with db.read() as session:
        row = session.get(PaymentIntent, held.intent.id)
        assert row is not None
        assert row.terms_sha256 == _digest(offer.raw) != _digest(asked.selection.offer.raw)


def _digest(entry: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
