"""The seller circuit breaker: a host that keeps taking payments without delivering is blocked for
the organisation.

Counting happens where an outcome is written: the ledger's `record_change` calls `count_outcome`
in the same transaction, under the organisation's lock, so every process sees one count and a
circuit opens exactly once. An open circuit stops `fetch_paid` and `quote_payment` at the preflight's
host step (`policy_denied`, reason `seller_circuit_open`), before anything is sent or signed. Only a
member clears it (the dashboard or the admin API); no tool can.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session

from auth.principal import Principal
from server.audit.service import record as audit
from server.kit.ids import new_id
from server.models import PaymentIntent, SellerCircuit
from server.payments.errors import CircuitNotFound
from server.payments.repository import SERVED, UNDELIVERED_CODES, CircuitRepository
from server.vocabulary import IntentStatus, PaymentSender

OPEN_FOR = timedelta(days=7)
REASON = "seller_circuit_open"


def undelivered(intent: PaymentIntent) -> bool:
    """The same judgement as the repository's count, on one row."""
    if intent.sent_by != PaymentSender.PAYWARDEN:
        return False
    if intent.status in (IntentStatus.FAILED, IntentStatus.EXPIRED):
        return intent.failure_code in UNDELIVERED_CODES
    if intent.status in SERVED:
        return intent.body_bytes == 0 or (intent.seller_status or 0) >= 400
    return False


def count_outcome(
    session: Session, intent: PaymentIntent, *, actor: str, now: datetime
) -> SellerCircuit | None:
    """Open the host's circuit when this outcome brings the organisation's undelivered payments
    to its threshold within its window (counted since the last clearing); the circuit opened."""
    if not undelivered(intent):
        return None
    circuits = CircuitRepository(session)
    if circuits.open_for(org_id=intent.org_id, host=intent.host, now=now) is not None:
        return None
    threshold, hours = circuits.thresholds(org_id=intent.org_id)
    since = now - timedelta(hours=hours)
    cleared = circuits.last_cleared(org_id=intent.org_id, host=intent.host)
    if cleared is not None and cleared > since:
        since = cleared
    failures = circuits.undelivered_count(org_id=intent.org_id, host=intent.host, since=since)
    if failures < threshold:
        return None
    circuit = circuits.add(
        SellerCircuit(
            id=new_id("circuit"),
            org_id=intent.org_id,
            host=intent.host,
            failures=failures,
            opened_at=now,
            open_until=now + OPEN_FOR,
        )
    )
    audit(
        session,
        org_id=intent.org_id,
        type="seller_circuit.opened",
        actor=actor,
        agent_id=intent.agent_id,
        subject_id=circuit.id,
        data={"host": intent.host, "failures": failures, "openUntil": circuit.open_until.isoformat()},
        now=now,
    )
    return circuit


def open_circuit(session: Session, *, org_id: str, host: str, now: datetime) -> SellerCircuit | None:
    return CircuitRepository(session).open_for(org_id=org_id, host=host, now=now)


def open_circuits(session: Session, principal: Principal, *, now: datetime) -> list[SellerCircuit]:
    """The organisation's open circuits, by host."""
    if principal.org_id is None:
        return []
    return CircuitRepository(session).open_in(org_id=principal.org_id, now=now)


def clear_circuit(session: Session, principal: Principal, *, host: str, now: datetime) -> SellerCircuit:
    """A member clears the host's open circuit; its earlier failures no longer count."""
    if principal.org_id is None or principal.agent_id is not None:
        raise CircuitNotFound()  # an agent never clears a circuit
    circuit = CircuitRepository(session).open_for(org_id=principal.org_id, host=host.lower(), now=now)
    if circuit is None:
        raise CircuitNotFound()
    circuit.cleared_at = now
    circuit.cleared_by = principal.actor[:40]
    session.add(circuit)
    audit(
        session,
        org_id=principal.org_id,
        type="seller_circuit.cleared",
        actor=principal.actor,
        subject_id=circuit.id,
        data={"host": circuit.host},
        now=now,
    )
    return circuit
