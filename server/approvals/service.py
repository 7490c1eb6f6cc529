"""Create, read, decide and expire approvals.

A held payment gets one approval, pending until a member decides or the organisation's TTL runs
out. Once approved, the agent has 10 minutes to retry with the same idempotency key; the retry
consumes the approval in the same transaction that authorises the payment, so it can pay once.
Expiry is computed on every read (`effective_status`) and also written back by the reconciler,
so both always agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from auth.principal import Principal
from server.audit.service import record as audit
from server.kit.clock import isoformat
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.kit.money import format_usd, usd_to_atomic
from server.models import Approval, Member, Organization, PaymentIntent
from server.payments.states import transition
from server.policy.engine import Decision
from server.tenancy.service import APPROVER_ROLES, find_member

RETRY_WINDOW = timedelta(minutes=10)
MAX_PENDING_PER_AGENT = 5
MAX_PENDING_PER_ORG = 20
STATUSES = ("pending", "approved", "denied", "expired", "consumed")


class ApprovalNotFound(PaywardenError):
    code = "approval_not_found"
    message = "No approval with that id for this agent."


class ApprovalDenied(PaywardenError):
    code = "approval_denied"
    message = "A human denied this payment, so nothing was paid. Do not retry it."


class ApprovalExpired(PaywardenError):
    code = "approval_expired"
    message = (
        "The approval expired, so nothing was paid. Call fetch_paid without idempotencyKey to ask again."
    )


class ApprovalConsumed(PaywardenError):
    code = "approval_consumed"
    message = "That approval was already used for a payment. Check list_payments."


class ApprovalQueueFull(PaywardenError):
    code = "approval_queue_full"
    message = "Too many payments are waiting for approval, so nothing was paid. Retry later."


class ApprovalNotPending(PaywardenError):
    code = "approval_not_pending"
    message = "That approval is no longer waiting for a decision. See status."


class Forbidden(PaywardenError):
    code = "forbidden"
    message = "Only a member with role owner, admin or approver can decide approvals."


def effective_status(approval: Approval, now: datetime) -> str:
    """The status as of `now`: a pending approval past its TTL, or an approval not used within
    10 minutes of being granted, is expired even before the reconciler writes it down."""
    if approval.status == "pending" and now >= approval.expires_at:
        return "expired"
    if (
        approval.status == "approved"
        and approval.decided_at is not None
        and now >= approval.decided_at + RETRY_WINDOW
    ):
        return "expired"
    return approval.status


def approval_url(public_url: str, approval_id: str) -> str:
    return f"{public_url}/approvals/{approval_id}"


def pending_counts(session: Session, *, org_id: str, agent_id: str, now: datetime) -> tuple[int, int]:
    """(this agent's, the organisation's) approvals still waiting for a decision."""
    base = (
        select(Approval.agent_id, func.count())
        .where(Approval.org_id == org_id, Approval.status == "pending")
        .where(col(Approval.expires_at) > now)
        .group_by(col(Approval.agent_id))
    )
    counts = {row[0]: int(row[1]) for row in session.exec(base)}
    return counts.get(agent_id, 0), sum(counts.values())


def create_approval(
    session: Session,
    *,
    org: Organization,
    intent: PaymentIntent,
    decision: Decision,
    decision_record: dict[str, Any],
    now: datetime,
) -> Approval:
    threshold = decision.threshold_usd
    approval = Approval(
        id=new_id("approval"),
        org_id=intent.org_id,
        agent_id=intent.agent_id,
        intent_id=intent.id,
        idempotency_key=intent.idempotency_key,
        status="pending",
        reason=decision.hold_reason or "threshold",
        threshold_atomic=None if threshold is None else usd_to_atomic(threshold),
        amount_atomic=intent.amount_atomic,
        host=intent.host,
        resource=intent.resource,
        pay_to=intent.pay_to,
        network=intent.network,
        asset=intent.asset,
        decision=decision_record,
        created_at=now,
        expires_at=now + timedelta(seconds=org.approval_ttl_seconds),
    )
    session.add(approval)
    session.flush()
    return approval


def for_intent(session: Session, intent_id: str) -> Approval | None:
    return session.exec(select(Approval).where(Approval.intent_id == intent_id)).first()


def get_for_agent(session: Session, *, approval_id: str, agent_id: str) -> Approval:
    approval = session.get(Approval, approval_id)
    if approval is None or approval.agent_id != agent_id:
        raise ApprovalNotFound()
    return approval


def list_for_org(session: Session, *, org_id: str, status: str | None, limit: int = 100) -> list[Approval]:
    query = select(Approval).where(Approval.org_id == org_id)
    if status is not None:
        query = query.where(Approval.status == status)
    return list(session.exec(query.order_by(col(Approval.created_at).desc()).limit(limit)))


def consume(approval: Approval, *, now: datetime) -> None:
    approval.status = "consumed"
    approval.consumed_at = now


def document(approval: Approval, now: datetime) -> dict[str, Any]:
    """The approval as the agent sees it (get_approval_status)."""
    status = effective_status(approval, now)
    return {
        "approvalId": approval.id,
        # A consumed approval was approved and paid: the agent sees `approved` with the intent.
        "status": "approved" if status == "consumed" else status,
        "intentId": approval.intent_id if status == "consumed" else None,
        "amountUsd": format_usd(approval.amount_atomic, atomic=True),
        "host": approval.host,
        "reason": approval.reason,
        "createdAt": isoformat(approval.created_at),
        "decidedAt": isoformat(approval.decided_at) if approval.decided_at else None,
        "expiresAt": isoformat(retry_deadline(approval) or approval.expires_at),
    }


def retry_deadline(approval: Approval) -> datetime | None:
    """Once approved, when the agent's chance to retry runs out."""
    if approval.decided_at is not None and approval.status in ("approved", "consumed"):
        return approval.decided_at + RETRY_WINDOW
    return None


def admin_document(approval: Approval, now: datetime) -> dict[str, Any]:
    return {
        **document(approval, now),
        "status": effective_status(approval, now),
        "agentId": approval.agent_id,
        "intentId": approval.intent_id,
        "payTo": approval.pay_to,
        "network": approval.network,
        "resource": approval.resource,
        "thresholdUsd": None
        if approval.threshold_atomic is None
        else format_usd(approval.threshold_atomic, atomic=True),
        "decidedBy": approval.decided_by,
        "versions": approval.decision.get("versions"),
    }


def decide(
    session: Session,
    *,
    approval_id: str,
    approve: bool,
    member_ref: str,
    operator: str,
    now: datetime,
) -> Approval:
    """A member's decision, taken from the command line (break-glass) and audited naming them."""
    approval = session.get(Approval, approval_id)
    if approval is None:
        raise ApprovalNotFound()
    lock_org(session, approval.org_id)
    session.refresh(approval)
    member = find_member(session, Principal.operator(operator), member_ref, org_id=approval.org_id)
    if member.disabled_at is not None or member.role not in APPROVER_ROLES:
        raise Forbidden()
    status = effective_status(approval, now)
    if status != "pending":
        raise ApprovalNotPending(status=status)
    approval.status = "approved" if approve else "denied"
    approval.decided_at = now
    approval.decided_by = member.id
    session.add(approval)
    if not approve:
        _close_intent(session, approval, to="failed", failure_code="approval_denied", now=now)
    _audit_decision(session, approval, member=member, operator=operator, now=now)
    return approval


def _audit_decision(
    session: Session, approval: Approval, *, member: Member, operator: str, now: datetime
) -> None:
    audit(
        session,
        org_id=approval.org_id,
        type=f"approval.{approval.status}",
        actor=f"member:{member.id}",
        agent_id=approval.agent_id,
        subject_id=approval.id,
        data={
            "memberId": member.id,
            "role": member.role,
            "via": "cli_break_glass",
            "operator": operator,
            "amountUsd": format_usd(approval.amount_atomic, atomic=True),
            "host": approval.host,
            "payTo": approval.pay_to,
            "network": approval.network,
            "reason": approval.reason,
            "intentId": approval.intent_id,
        },
        now=now,
    )


def _close_intent(session: Session, approval: Approval, *, to: str, failure_code: str, now: datetime) -> None:
    intent = session.get(PaymentIntent, approval.intent_id)
    if intent is not None and intent.status == "created":
        transition(intent, to, now=now)
        intent.failure_code = failure_code
        session.add(intent)


def expire_due(session: Session, *, now: datetime, limit: int = 200) -> Sequence[Approval]:
    """Write down the expiry of approvals whose time ran out; their held intents expire too."""
    due = list(
        session.exec(
            select(Approval).where(Approval.status == "pending", col(Approval.expires_at) <= now).limit(limit)
        )
    ) + list(
        session.exec(
            select(Approval)
            .where(Approval.status == "approved")
            .where(col(Approval.decided_at) <= now - RETRY_WINDOW)
            .limit(limit)
        )
    )
    expired: dict[str, Approval] = {}
    for approval in due:
        if approval.id in expired:
            continue
        lock_org(session, approval.org_id)
        session.refresh(approval)
        if effective_status(approval, now) != "expired" or approval.status == "expired":
            continue
        approval.status = "expired"
        session.add(approval)
        _close_intent(session, approval, to="expired", failure_code="approval_expired", now=now)
        audit(
            session,
            org_id=approval.org_id,
            type="approval.expired",
            actor="system:reconciler",
            agent_id=approval.agent_id,
            subject_id=approval.id,
            data={"intentId": approval.intent_id},
            now=now,
        )
        expired[approval.id] = approval
    return list(expired.values())
