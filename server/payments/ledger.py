"""The ledger of payment intents: counted spend, legal state changes, and atomic reservations.

A payment counts against the agent's windows from the moment it is authorised. A failed or
expired payment keeps counting until its authorisation's `validBefore` has passed, because until
then the signed transfer could still be submitted. Reservation reads the spend and writes the
intent in one transaction that holds the organisation's write lock, so no two payments can both
fit under a cap that only has room for one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session, col, select

from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.kit.money import format_usd
from server.models import Agent, PaymentIntent
from server.policy.engine import Decision, Payment, Usage, evaluate
from server.policy.model import Policy
from server.policy.service import current_policy
from server.x402.authorization import derive_nonce, validity_window
from server.x402.selection import Selection

STATUSES = ("created", "authorized", "submitted", "settlement_pending", "settled", "failed", "expired")
COUNTED = ("authorized", "submitted", "settlement_pending", "settled")
COUNTED_UNTIL_VALID_BEFORE = ("failed", "expired")
IN_FLIGHT = ("created", "authorized", "submitted")

TRANSITIONS: dict[str, frozenset[str]] = {
    "created": frozenset({"authorized", "failed"}),
    "authorized": frozenset({"submitted", "failed", "expired"}),
    "submitted": frozenset({"settlement_pending", "settled", "failed", "expired"}),
    "settlement_pending": frozenset({"settled", "failed", "expired"}),
    # Only chain evidence moves a payment out of a final state: the transfer was found after all.
    "failed": frozenset({"settled"}),
    "expired": frozenset({"settled"}),
    "settled": frozenset(),
}


class IllegalTransition(PaywardenError):
    code = "internal_error"
    message = "Unexpected error in the server."


def transition(intent: PaymentIntent, to: str, *, now: datetime) -> None:
    if to not in TRANSITIONS[intent.status]:
        raise IllegalTransition(detail=f"{intent.status} -> {to}")
    intent.status = to
    intent.updated_at = now


def counted_clause(now_unix: int) -> Any:
    return or_(
        col(PaymentIntent.status).in_(COUNTED),
        and_(
            col(PaymentIntent.status).in_(COUNTED_UNTIL_VALID_BEFORE),
            col(PaymentIntent.valid_before) > now_unix,
        ),
    )


def spent_since(session: Session, *, agent_id: str, since: datetime, now: datetime) -> tuple[int, int]:
    """(atomic amount, number of payments) counted for the agent since `since`."""
    row = session.exec(
        select(func.coalesce(func.sum(PaymentIntent.amount_atomic), 0), func.count())
        .where(PaymentIntent.agent_id == agent_id)
        .where(col(PaymentIntent.authorized_at) >= since)
        .where(counted_clause(int(now.timestamp())))
    ).one()
    return int(row[0]), int(row[1])


def usage_for(session: Session, *, agent_id: str, policy: Policy, now: datetime) -> Usage:
    day_start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    spent_today, _ = spent_since(session, agent_id=agent_id, since=day_start, now=now)
    window_start = now - timedelta(seconds=policy.velocity.window_seconds)
    window_spent, window_count = spent_since(session, agent_id=agent_id, since=window_start, now=now)
    return Usage(
        spent_today_atomic=spent_today, window_tx_count=window_count, window_spent_atomic=window_spent
    )


def find_by_key(session: Session, *, agent_id: str, key: str) -> PaymentIntent | None:
    return session.exec(
        select(PaymentIntent).where(PaymentIntent.agent_id == agent_id, PaymentIntent.idempotency_key == key)
    ).first()


@dataclass(frozen=True)
class PurchaseFacts:
    """Everything the reservation needs to know about the purchase, fixed before it starts."""

    idempotency_key: str
    fingerprint: str
    method: str
    host: str
    path: str
    resource: str
    origin: str | None
    x402_version: int
    resource_host: str | None
    selection: Selection
    payer: str
    wallet_mode: str
    instruction_like_description: bool = False


@dataclass(frozen=True)
class Reservation:
    decision: Decision | None = None
    intent: PaymentIntent | None = None
    existing: PaymentIntent | None = None  # the key already names a purchase


def _decision_record(decision: Decision, facts: PurchaseFacts) -> dict[str, Any]:
    return {
        "outcome": decision.outcome,
        "reasons": list(decision.reasons),
        "policyVersion": decision.policy_version,
        "holdReason": decision.hold_reason,
        "host": facts.host,
        "network": facts.selection.network,
        "payTo": facts.selection.pay_to,
        "amountUsd": format_usd(facts.selection.amount_atomic, atomic=True),
    }


def reserve(
    session: Session, *, agent: Agent, facts: PurchaseFacts, actor: str, now: datetime
) -> Reservation:
    """Decide and, when allowed, record the authorised intent: one transaction, org-locked."""
    lock_org(session, agent.org_id)
    existing = find_by_key(session, agent_id=agent.id, key=facts.idempotency_key)
    if existing is not None:
        return Reservation(existing=existing)
    policy = current_policy(session, agent.id)
    selection = facts.selection
    payment = Payment(
        host=facts.host,
        path=facts.path,
        network=selection.network,
        asset="USDC",
        pay_to=selection.pay_to,
        amount_atomic=selection.amount_atomic,
        resource_host=facts.resource_host,
        instruction_like_description=facts.instruction_like_description,
    )
    decision = evaluate(policy, payment, usage_for(session, agent_id=agent.id, policy=policy, now=now))
    record = _decision_record(decision, facts)
    if not decision.allowed:
        audit(
            session,
            org_id=agent.org_id,
            type="payment.denied" if decision.outcome == "deny" else "payment.held",
            actor=actor,
            agent_id=agent.id,
            data={**record, "idempotencyKey": facts.idempotency_key},
            now=now,
        )
        return Reservation(decision=decision)

    intent_id = new_id("intent")
    valid_after, valid_before = validity_window(int(now.timestamp()), selection.max_timeout_seconds)
    intent = PaymentIntent(
        id=intent_id,
        org_id=agent.org_id,
        agent_id=agent.id,
        idempotency_key=facts.idempotency_key,
        fingerprint=facts.fingerprint,
        status="authorized",
        origin=facts.origin,
        method=facts.method,
        host=facts.host,
        resource=facts.resource,
        x402_version=facts.x402_version,
        network=selection.network,
        asset=selection.asset,
        pay_to=selection.pay_to,
        amount_atomic=selection.amount_atomic,
        payer=facts.payer,
        nonce=derive_nonce(intent_id),
        valid_after=valid_after,
        valid_before=valid_before,
        policy_version=decision.policy_version,
        decision=record,
        wallet_mode=facts.wallet_mode,
        created_at=now,
        authorized_at=now,
        updated_at=now,
    )
    session.add(intent)
    session.flush()
    audit(
        session,
        org_id=agent.org_id,
        type="payment.authorized",
        actor=actor,
        agent_id=agent.id,
        subject_id=intent.id,
        data={
            **record,
            "idempotencyKey": facts.idempotency_key,
            "origin": facts.origin,
            "nonce": intent.nonce,
        },
        now=now,
    )
    return Reservation(decision=decision, intent=intent)


def update_intent(
    session: Session, *, intent_id: str, to: str, actor: str, now: datetime, event: str, **fields: Any
) -> PaymentIntent:
    """Move an intent to `to`, set fields, and audit it, under the organisation's lock."""
    intent = session.get(PaymentIntent, intent_id)
    if intent is None:
        raise IllegalTransition(detail="unknown intent")
    lock_org(session, intent.org_id)
    session.refresh(intent)
    if intent.status != to:
        transition(intent, to, now=now)
    for name, value in fields.items():
        setattr(intent, name, value)
    intent.updated_at = now
    session.add(intent)
    audit(
        session,
        org_id=intent.org_id,
        type=event,
        actor=actor,
        agent_id=intent.agent_id,
        subject_id=intent.id,
        data={
            "status": intent.status,
            "httpStatus": intent.seller_status,
            "txHash": intent.tx_hash,
            "failureCode": intent.failure_code,
        },
        now=now,
    )
    return intent


def list_payments(session: Session, *, agent_id: str, limit: int, status: str | None) -> list[PaymentIntent]:
    query = select(PaymentIntent).where(PaymentIntent.agent_id == agent_id)
    if status is not None:
        query = query.where(PaymentIntent.status == status)
    return list(session.exec(query.order_by(col(PaymentIntent.created_at).desc()).limit(limit)))
