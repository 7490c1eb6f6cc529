"""The seller circuit breaker's count, on both databases: which outcomes count as paid but not
delivered, the organisation's window and threshold, and a member's clearing starting the count
again. Counting happens in the ledger's outcome write (`record_change`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from auth.principal import Principal
from server.catalog.service import find_listed
from server.kit.db import Database
from server.models import Organization, SellerCircuit
from server.payments.circuits import clear_circuit, open_circuit
from server.payments.errors import CircuitNotFound
from server.payments.ledger import update_intent
from server.payments.repository import CircuitRepository
from server.vocabulary import IntentStatus, PaymentSender
from tests.support.clocks import written
from tests.support.ledger import PAYEE, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import AgentSetup, make_agent, pin_payee

HOST = "api.example.com"
NOW = written(2026, 12, 4, 12, 0)
S = IntentStatus


def _agent(db: Database) -> AgentSetup:
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=[HOST], daily_cap="5.00")
    with db.read() as session:
        listed = find_listed(session, HOST)
    if listed is None:  # not about the first-payment hold: the catalog pins the payee
        pin_payee(db, url=f"https://{HOST}/v1/search", pay_to=PAYEE)
    return setup


def _outcome(db: Database, agent: AgentSetup, key: str, at: datetime, to: IntentStatus, **fields: Any) -> str:
    """A payment reserved, sent, and ended as `to` at `at` (through the ledger's own writes)."""
    reservation = reserve_now(db, agent.agent_id, facts(key, host=HOST), at)
    assert reservation.intent is not None
    intent_id = reservation.intent.id
    with db.write() as session:
        update_intent(
            session, OPERATOR, intent_id=intent_id, to=S.SUBMITTED, now=at, event="payment.submitted"
        )
        if to == S.SETTLED:
            update_intent(session, OPERATOR, intent_id=intent_id, to=S.SETTLEMENT_PENDING, now=at, event="x")
        update_intent(
            session,
            OPERATOR,
            intent_id=intent_id,
            to=to,
            now=at,
            event="payment.outcome",
            **{"completed_at": at, **fields},
        )
    return intent_id


def _open(db: Database, agent: AgentSetup, now: datetime = NOW) -> SellerCircuit | None:
    with db.read() as session:
        return open_circuit(session, org_id=agent.org_id, host=HOST, now=now)


def _count(db: Database, agent: AgentSetup, since: datetime) -> int:
    with db.read() as session:
        return CircuitRepository(session).undelivered_count(org_id=agent.org_id, host=HOST, since=since)


def test_only_paid_and_undelivered_outcomes_count_and_the_third_opens_the_circuit(db: Database) -> None:
    agent = _agent(db)
    # Outside the default 24 hours: counted by nothing.
    _outcome(db, agent, "old", NOW - timedelta(hours=25), S.FAILED, failure_code="payment_not_completed")
    # Not undelivered: served with a body, or failed before anything left.
    _outcome(db, agent, "good", NOW, S.SETTLED, body_bytes=12, seller_status=200)
    _outcome(db, agent, "unsent", NOW, S.FAILED, failure_code="signing_failed")
    assert _count(db, agent, NOW - timedelta(hours=24)) == 0

    rejected = _outcome(
        db, agent, "rejected", NOW, S.FAILED, failure_code="payment_rejected_by_seller", seller_status=402
    )
    _outcome(db, agent, "empty", NOW, S.SETTLED, body_bytes=0, seller_status=200)
    assert _count(db, agent, NOW - timedelta(hours=24)) == 2
    assert _open(db, agent) is None

    _outcome(db, agent, "error", NOW, S.SETTLED, body_bytes=40, seller_status=502)
    circuit = _open(db, agent)
    assert circuit is not None
    assert circuit.failures == 3
    assert circuit.open_until == NOW + timedelta(days=7)
    assert _open(db, agent, NOW + timedelta(days=7)) is None  # seven days, then it closes by itself

    # Another organisation's circuit stays shut.
    other = _agent(db)
    with db.read() as session:
        assert open_circuit(session, org_id=other.org_id, host=HOST, now=NOW) is None

    # A member clears it; the failures before the clearing stop counting.
    member = Principal.for_member(org_id=agent.org_id, member_id="mem_test")
    with db.write() as session:
        cleared = clear_circuit(session, member, host=HOST, now=NOW + timedelta(minutes=1))
    assert cleared.cleared_at is not None
    assert _open(db, agent, NOW + timedelta(minutes=1)) is None
    later = NOW + timedelta(minutes=2)
    # A failure from before the clearing that the chain later shows settled is still counted at
    # the time of its outcome, so it does not count again.
    with db.write() as session:
        update_intent(session, OPERATOR, intent_id=rejected, to=S.SETTLED, now=later, event="payment.settled")
    assert _count(db, agent, NOW + timedelta(minutes=1)) == 0
    _outcome(db, agent, "after", later, S.FAILED, failure_code="payment_outcome_unknown")
    assert _open(db, agent, later) is None

    with db.write() as session, pytest.raises(CircuitNotFound):
        clear_circuit(session, member, host=HOST, now=later)


def test_the_threshold_and_window_are_the_organisations(db: Database) -> None:
    agent = _agent(db)
    with db.write() as session:
        org = session.get(Organization, agent.org_id)
        assert org is not None
        org.circuit_failures, org.circuit_window_hours = 2, 48
        session.add(org)
    _outcome(
        db, agent, "a", NOW - timedelta(hours=40), S.FAILED, failure_code="not_settled_before_valid_before"
    )
    assert _open(db, agent, NOW - timedelta(hours=40)) is None
    _outcome(db, agent, "b", NOW, S.EXPIRED, failure_code="payment_not_completed")
    assert _open(db, agent) is not None


def test_an_agent_never_clears_a_circuit(db: Database) -> None:
    agent = _agent(db)
    for key in ("x", "y", "z"):
        _outcome(db, agent, key, NOW, S.FAILED, failure_code="payment_not_completed")
    as_agent = Principal.for_agent(
        org_id=agent.org_id, agent_id=agent.agent_id, token_id="tok_x", scopes=frozenset()
    )
    with db.write() as session, pytest.raises(CircuitNotFound):
        clear_circuit(session, as_agent, host=HOST, now=NOW)
    assert _open(db, agent) is not None


def test_payments_an_agent_sent_itself_never_count_and_an_identifier_conflict_does(db: Database) -> None:
    agent = _agent(db)
    since = NOW - timedelta(hours=24)
    # pay_x402 handed the header over: whatever came of it, the seller's answer is not Paywarden's
    # to judge, not even a payment that lapsed unsettled (the agent may never have sent it).
    for key in ("handed-1", "handed-2", "handed-3"):
        _outcome(
            db,
            agent,
            key,
            NOW,
            S.EXPIRED,
            sent_by=PaymentSender.AGENT,
            failure_code="not_settled_before_valid_before",
        )
    _outcome(db, agent, "handed-4", NOW, S.SETTLED, sent_by=PaymentSender.AGENT)  # no body, no status known
    assert _count(db, agent, since) == 0
    assert _open(db, agent) is None
    # The same lapse of a payment Paywarden sent counts, and so does a seller's 409 for its identifier.
    _outcome(db, agent, "sent-1", NOW, S.EXPIRED, failure_code="not_settled_before_valid_before")
    _outcome(
        db, agent, "sent-2", NOW, S.FAILED, failure_code="payment_identifier_conflict", seller_status=409
    )
    assert _count(db, agent, since) == 2
