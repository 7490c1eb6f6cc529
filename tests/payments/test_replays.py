"""A key names one purchase: what fetch_paid answers when the key's purchase is in flight, failed,
held, denied or consumed. The answer comes from the ledger before any seller is contacted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from server.kit.db import Database
from server.payments import decisions
from server.payments.fingerprint import request_fingerprint
from server.payments.inputs import validate_fetch_paid
from server.payments.ledger import update_intent
from server.vocabulary import IntentStatus
from tests.support.ledger import authorize_held_now, facts, reserve_now
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.principals import OPERATOR
from tests.support.tenants import AgentSetup, make_agent, make_member, pin_payee

pytestmark = pytest.mark.anyio

URL = "https://api.example.com/v1/search"


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url) as running:
        yield running


def fingerprint(url: str = URL) -> str:
    request = validate_fetch_paid(
        {"url": url}, bearer=None, public_host="127.0.0.1:1", allow_private_hosts=True
    )
    return request_fingerprint(request)


def agent(server: RunningServer, db: Database, *, pin: bool) -> AgentSetup:
    setup = make_agent(db, server.settings, allow_hosts=["api.example.com"])
    if pin:
        pin_payee(db, url=URL, pay_to=facts("x").selection.pay_to)
    return setup


def now() -> datetime:
    return datetime.now(UTC)


async def test_in_flight_failed_and_reused_keys(server: RunningServer, db: Database) -> None:
    setup = agent(server, db, pin=True)
    reservation = reserve_now(db, setup.agent_id, facts("inflight-1", fingerprint=fingerprint()), now())
    assert reservation.intent is not None
    intent_id = reservation.intent.id
    async with mcp_client(server.mcp_url, setup.token) as client:
        error = error_of(await client.call_tool("fetch_paid", {"url": URL, "idempotencyKey": "inflight-1"}))
        assert (error["code"], error["intentId"], error["idempotencyKey"]) == (
            "payment_in_progress",
            intent_id,
            "inflight-1",
        )
        other_url = URL + "?page=2"
        error = error_of(
            await client.call_tool("fetch_paid", {"url": other_url, "idempotencyKey": "inflight-1"})
        )
        assert error["code"] == "idempotency_key_reused"
        error = error_of(
            await client.call_tool(
                "fetch_paid", {"url": URL, "method": "POST", "idempotencyKey": "inflight-1"}
            )
        )
        assert error["code"] == "idempotency_key_reused"
        with db.write() as session:
            update_intent(
                session,
                OPERATOR,
                intent_id=intent_id,
                to=IntentStatus.FAILED,
                now=now(),
                event="payment.failed",
            )
        error = error_of(await client.call_tool("fetch_paid", {"url": URL, "idempotencyKey": "inflight-1"}))
        assert (error["code"], error["intentId"]) == ("intent_not_replayable", intent_id)


async def test_held_keys_answer_for_their_approval(server: RunningServer, db: Database) -> None:
    setup = agent(server, db, pin=False)
    member = make_member(db, setup.org_id)
    held = reserve_now(db, setup.agent_id, facts("held-key-1", fingerprint=fingerprint()), now())
    denied = reserve_now(db, setup.agent_id, facts("held-key-2", fingerprint=fingerprint()), now())
    assert held.intent is not None
    assert held.approval is not None
    assert denied.approval is not None
    async with mcp_client(server.mcp_url, setup.token) as client:
        pending = structured(
            await client.call_tool("fetch_paid", {"url": URL, "idempotencyKey": "held-key-1"})
        )
        assert (pending["status"], pending["approvalId"], pending["reason"]) == (
            "pending_approval",
            held.approval.id,
            "new_pay_to",
        )
        assert (
            error_of(
                await client.call_tool("fetch_paid", {"url": URL + "x", "idempotencyKey": "held-key-1"})
            )["code"]
            == "idempotency_key_reused"
        )

        with db.write() as session:
            decisions.decide_break_glass(
                session,
                OPERATOR,
                approval_id=denied.approval.id,
                approve=False,
                member_ref=member,
                via="test",
                now=now(),
            )
        error = error_of(await client.call_tool("fetch_paid", {"url": URL, "idempotencyKey": "held-key-2"}))
        assert error["code"] == "approval_denied"

        # Approved and used by a payment that then failed: the approval cannot pay again.
        with db.write() as session:
            decisions.decide_break_glass(
                session,
                OPERATOR,
                approval_id=held.approval.id,
                approve=True,
                member_ref=member,
                via="test",
                now=now(),
            )
        used = authorize_held_now(
            db, setup.agent_id, held.intent.id, facts("held-key-1", fingerprint=fingerprint()), now()
        )
        assert used.kind == "authorized"
        with db.write() as session:
            update_intent(
                session,
                OPERATOR,
                intent_id=held.intent.id,
                to=IntentStatus.FAILED,
                now=now(),
                event="payment.failed",
            )
        error = error_of(await client.call_tool("fetch_paid", {"url": URL, "idempotencyKey": "held-key-1"}))
        assert (error["code"], error["intentId"]) == ("approval_consumed", held.intent.id)
