"""Create, read, decide and expire approvals.

A held payment gets one approval, pending until a member decides or the organisation's TTL runs
out. Once approved, the agent has 10 minutes to retry with the same idempotency key; the retry
consumes the approval in the same transaction that authorises the payment, so it can pay once.
An approval covers the hold reasons it was created for (and, for a rule hold, those rules): a
retry that meets another one supersedes it with a new approval for the same payment.
Expiry is computed on every read (`effective_status`) and also written back by the reconciler,
so both always agree.

Members decide on the approval page: `start_decision` hands out a passkey challenge that commits to
the decision, the payment and a single-use nonce, and `decide_with_passkey` checks the answer
against the challenge recomputed from the rows. An operator can decide for a member from the
command line (`decide_break_glass`). Both write the decision through `_record_decision`, which no
MCP tool can reach.

Approvals never move payment intents: the payments domain closes a held intent when its approval
is denied or expires (server/payments/decisions.py).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session

from auth.errors import ChallengeExpired, PasskeyCheckFailed
from auth.passkeys import Ceremony, RelyingParty, confirmation_options, verify_confirmation
from auth.principal import Principal
from server.approvals.confirmation import challenge_for, new_nonce
from server.approvals.errors import (
    ApprovalConsumed,
    ApprovalDenied,
    ApprovalExpired,
    ApprovalNotFound,
    ApprovalNotPending,
    Forbidden,
)
from server.approvals.repository import ApprovalRepository
from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.ids import new_id
from server.kit.metrics import APPROVAL_WAIT
from server.kit.money import format_usd
from server.models import Approval, Member, MemberPasskey, PaymentIntent, WebAuthnChallenge
from server.tenancy.service import MemberNotFound, find_member
from server.vocabulary import ApprovalStatus, ChallengePurpose, HoldReason

RETRY_WINDOW = timedelta(minutes=10)
MAX_PENDING_PER_AGENT = 5
MAX_PENDING_PER_ORG = 20
EXPIRY_BATCH = 200


def effective_status(approval: Approval, now: datetime) -> ApprovalStatus:
    """The status as of `now`: a pending approval past its TTL, or an approval not used within
    10 minutes of being granted, is expired even before the reconciler writes it down."""
    if approval.status == ApprovalStatus.PENDING and now >= approval.expires_at:
        return ApprovalStatus.EXPIRED
    if (
        approval.status == ApprovalStatus.APPROVED
        and approval.decided_at is not None
        and now >= approval.decided_at + RETRY_WINDOW
    ):
        return ApprovalStatus.EXPIRED
    return approval.status


def retry_deadline(approval: Approval) -> datetime | None:
    """Once approved, when the agent's chance to retry runs out."""
    if approval.decided_at is not None and approval.status in (
        ApprovalStatus.APPROVED,
        ApprovalStatus.CONSUMED,
    ):
        return approval.decided_at + RETRY_WINDOW
    return None


def raise_if_closed(approval: Approval, now: datetime) -> None:
    """The error for retrying a held payment whose approval can no longer pay: denied, expired or
    already used. Pending and approved approvals pass."""
    status = effective_status(approval, now)
    if status == ApprovalStatus.DENIED:
        raise ApprovalDenied()
    if status == ApprovalStatus.EXPIRED:
        raise ApprovalExpired()
    if status == ApprovalStatus.CONSUMED:
        raise ApprovalConsumed(intentId=approval.intent_id)


def approval_url(public_url: str, approval_id: str) -> str:
    return f"{public_url}/approvals/{approval_id}"


@dataclass(frozen=True)
class AgentView:
    """An approval as the agent that asked for it sees it (get_approval_status)."""

    approval: Approval
    status: ApprovalStatus  # a consumed approval shows as approved, with the intent it paid
    intent_id: str | None
    expires_at: datetime  # the retry deadline once approved, else the TTL


def agent_view(approval: Approval, now: datetime) -> AgentView:
    status = effective_status(approval, now)
    consumed = status == ApprovalStatus.CONSUMED
    return AgentView(
        approval,
        ApprovalStatus.APPROVED if consumed else status,
        approval.intent_id if consumed else None,
        retry_deadline(approval) or approval.expires_at,
    )


def get(session: Session, principal: Principal, approval_id: str) -> Approval:
    """One approval the principal may see (an agent sees only its own), or ApprovalNotFound."""
    approval = ApprovalRepository(session).get_readable(principal, approval_id)
    if approval is None:
        raise ApprovalNotFound()
    return approval


def for_intent(session: Session, principal: Principal, intent_id: str) -> Approval | None:
    return ApprovalRepository(session).for_intent(principal, intent_id)


def newest(
    session: Session, principal: Principal, *, org_id: str, status: ApprovalStatus | None, limit: int = 100
) -> list[Approval]:
    return list(ApprovalRepository(session).newest(principal, org_id=org_id, status=status, limit=limit))


def queue_full(session: Session, *, org_id: str, agent_id: str, now: datetime) -> dict[str, int] | None:
    """None when another approval may wait; otherwise the counts that are at their limit."""
    counts = ApprovalRepository(session).pending_by_agent(org_id=org_id, now=now)
    agent_pending, org_pending = counts.get(agent_id, 0), sum(counts.values())
    if agent_pending >= MAX_PENDING_PER_AGENT or org_pending >= MAX_PENDING_PER_ORG:
        return {"agentPending": agent_pending, "orgPending": org_pending}
    return None


def create(
    session: Session,
    *,
    intent: PaymentIntent,
    reason: HoldReason,
    threshold_atomic: int | None,
    decision_record: dict[str, Any],
    now: datetime,
) -> Approval:
    """The approval a held intent waits on, expiring after the organisation's TTL."""
    repository = ApprovalRepository(session)
    approval = Approval(
        id=new_id("approval"),
        org_id=intent.org_id,
        agent_id=intent.agent_id,
        intent_id=intent.id,
        idempotency_key=intent.idempotency_key,
        status=ApprovalStatus.PENDING,
        reason=reason,
        threshold_atomic=threshold_atomic,
        amount_atomic=intent.amount_atomic,
        host=intent.host,
        resource=intent.resource,
        pay_to=intent.pay_to,
        network=intent.network,
        asset=intent.asset,
        decision=decision_record,
        created_at=now,
        expires_at=now + timedelta(seconds=repository.ttl_seconds(intent.org_id)),
    )
    return repository.add(approval)


def covered(approval: Approval) -> tuple[frozenset[str], frozenset[str]]:
    """The hold reasons and the hold rules a person saw when deciding this approval."""
    reasons = approval.decision.get("holdReasons") or [str(approval.reason)]
    rules = approval.decision.get("rules") or []
    return frozenset(str(reason) for reason in reasons), frozenset(str(rule) for rule in rules)


def uncovered(approval: Approval, *, reasons: tuple[str, ...], rules: tuple[str, ...]) -> tuple[str, ...]:
    """The hold reasons of a fresh decision that this approval does not cover, in their order: a
    reason it was not created for, or a `rule` hold by a rule it did not name."""
    seen_reasons, seen_rules = covered(approval)
    return tuple(
        reason
        for reason in reasons
        if reason not in seen_reasons or (reason == HoldReason.RULE and not set(rules) <= seen_rules)
    )


def supersede(
    session: Session,
    approval: Approval,
    *,
    intent: PaymentIntent,
    reason: HoldReason,
    threshold_atomic: int | None,
    decision_record: dict[str, Any],
    actor: str,
    now: datetime,
) -> Approval:
    """Replace `approval` by a new pending one for the same intent; the old one can never pay."""
    approval.status = ApprovalStatus.SUPERSEDED
    session.add(approval)
    session.flush()  # before the new row: at most one approval of an intent is in force
    fresh = create(
        session,
        intent=intent,
        reason=reason,
        threshold_atomic=threshold_atomic,
        decision_record=decision_record,
        now=now,
    )
    audit(
        session,
        org_id=approval.org_id,
        type="approval.superseded",
        actor=actor,
        agent_id=approval.agent_id,
        subject_id=approval.id,
        data={"intentId": approval.intent_id, "approvalId": fresh.id, "reason": str(reason)},
        now=now,
    )
    return fresh


def consume(approval: Approval, *, now: datetime) -> None:
    approval.status = ApprovalStatus.CONSUMED
    approval.consumed_at = now


def decide_break_glass(
    session: Session,
    principal: Principal,
    *,
    approval_id: str,
    approve: bool,
    member_ref: str,
    via: str,
    now: datetime,
) -> Approval:
    """A member's decision made on their behalf by an operator (the command line's break-glass
    path), audited naming the member and the principal that carried it out."""
    repository = ApprovalRepository(session)
    approval = repository.get_readable(principal, approval_id)
    if approval is None:
        raise ApprovalNotFound()
    lock_org(session, approval.org_id)
    repository.refresh(approval)
    member = find_member(session, principal, member_ref, org_id=approval.org_id)
    if member.disabled_at is not None or not member.role.may_approve:
        raise Forbidden()
    _record_decision(
        session,
        approval,
        member=member,
        approve=approve,
        data={"via": via, "operator": principal.actor},
        now=now,
    )
    return approval


def _observe_wait(approval: Approval, *, until: datetime) -> None:
    """How long the approval waited for a person, by how it ended (approved, denied, expired)."""
    waited = max((until - approval.created_at).total_seconds(), 0.0)
    APPROVAL_WAIT.labels(outcome=str(approval.status)).observe(waited)


def _record_decision(
    session: Session,
    approval: Approval,
    *,
    member: Member,
    approve: bool,
    data: dict[str, Any],
    now: datetime,
) -> None:
    status = effective_status(approval, now)
    if status != ApprovalStatus.PENDING:
        raise ApprovalNotPending(status=str(status))
    approval.status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    approval.decided_at = now
    _observe_wait(approval, until=now)
    approval.decided_by = member.id
    session.add(approval)
    audit(
        session,
        org_id=approval.org_id,
        type=f"approval.{approval.status}",
        actor=f"member:{member.id}",
        agent_id=approval.agent_id,
        subject_id=approval.id,
        data={
            "memberId": member.id,
            "role": str(member.role),
            **data,
            "amountUsd": format_usd(approval.amount_atomic, atomic=True),
            "host": approval.host,
            "payTo": approval.pay_to,
            "network": approval.network,
            "reason": str(approval.reason),
            "intentId": approval.intent_id,
        },
        now=now,
    )


def for_decider(session: Session, principal: Principal, *, member: Member, approval_id: str) -> Approval:
    """An approval of `member`'s organisation, for a member who may decide approvals (owner, admin
    or approver). Anyone else learns nothing, not even whether it exists: ApprovalNotFound."""
    if member.disabled_at is not None or not member.role.may_approve or principal.member_id != member.id:
        raise ApprovalNotFound()
    approval = ApprovalRepository(session).get_readable(principal, approval_id)
    if approval is None or approval.org_id != member.org_id:
        raise ApprovalNotFound()
    return approval


def pending_for_decider(
    session: Session, principal: Principal, *, member: Member, now: datetime
) -> list[Approval]:
    """The approvals waiting for a decision in `member`'s organisation, oldest first (the inbox);
    empty for a member who may not decide."""
    if member.disabled_at is not None or not member.role.may_approve:
        return []
    rows = ApprovalRepository(session).pending(principal, org_id=member.org_id, now=now)
    return list(rows)


def decided_for_decider(
    session: Session, principal: Principal, *, member: Member, limit: int = 50
) -> list[Approval]:
    """The approvals of `member`'s organisation that a person decided, newest decision first (the
    inbox's Decided tab); empty for a member who may not decide."""
    if member.disabled_at is not None or not member.role.may_approve:
        return []
    return list(ApprovalRepository(session).decided(principal, org_id=member.org_id, limit=limit))


def decider_email(session: Session, principal: Principal, approval: Approval) -> str | None:
    """The email of the member who decided `approval`, if a member of its organisation did."""
    if approval.decided_by is None:
        return None
    try:
        return find_member(session, principal, approval.decided_by, org_id=approval.org_id).email
    except MemberNotFound:
        return None


def _purpose(approve: bool) -> ChallengePurpose:
    return ChallengePurpose.APPROVE_PAYMENT if approve else ChallengePurpose.DENY_PAYMENT


def start_decision(
    session: Session,
    principal: Principal,
    *,
    member: Member,
    approval_id: str,
    approve: bool,
    rp: RelyingParty,
    now: datetime,
) -> Ceremony:
    """A passkey ceremony whose challenge commits to this decision on this payment and to a new
    single-use nonce kept in the database (see server/approvals/confirmation.py)."""
    approval = for_decider(session, principal, member=member, approval_id=approval_id)
    status = effective_status(approval, now)
    if status != ApprovalStatus.PENDING:
        raise ApprovalNotPending(status=str(status))
    nonce = new_nonce()
    return confirmation_options(
        session,
        rp=rp,
        member=member,
        purpose=_purpose(approve),
        challenge=challenge_for(approval, approve=approve, nonce=nonce),
        approval_id=approval.id,
        nonce=nonce,
        now=now,
    )


def decide_with_passkey(
    session: Session,
    principal: Principal,
    *,
    member: Member,
    approval_id: str,
    challenge: WebAuthnChallenge,
    credential: object,
    rp: RelyingParty,
    now: datetime,
) -> tuple[Approval, MemberPasskey]:
    """A member's decision on the approval page, confirmed by their passkey.

    `challenge` was claimed (used up) by the caller in a transaction of its own. The challenge is
    recomputed here from the approval's row as it is now and the nonce kept with the challenge, so
    the passkey must have signed exactly this decision on exactly this payment."""
    if (
        challenge.member_id != member.id
        or challenge.approval_id != approval_id
        or challenge.nonce is None
        or challenge.purpose not in (ChallengePurpose.APPROVE_PAYMENT, ChallengePurpose.DENY_PAYMENT)
    ):
        raise ChallengeExpired()
    approve = challenge.purpose is ChallengePurpose.APPROVE_PAYMENT
    approval = for_decider(session, principal, member=member, approval_id=approval_id)
    lock_org(session, approval.org_id)
    ApprovalRepository(session).refresh(approval)
    expected = challenge_for(approval, approve=approve, nonce=challenge.nonce)
    if not hmac.compare_digest(expected, challenge.challenge):
        raise PasskeyCheckFailed()  # the payment is not the one the challenge was made for
    passkey = verify_confirmation(
        session, rp=rp, member=member, expected_challenge=expected, credential=credential, now=now
    )
    _record_decision(
        session,
        approval,
        member=member,
        approve=approve,
        data={
            "via": "approval_page",
            "passkeyId": passkey.id,
            "credentialId": passkey.credential_id,
            "passkeyName": passkey.name,
            "challengeId": challenge.id,
        },
        now=now,
    )
    return approval, passkey


def end_for_disabled_agent(
    session: Session, principal: Principal, *, agent_id: str, org_id: str, actor: str, now: datetime
) -> list[Approval]:
    """A disabled agent's approvals that could still let it pay: the pending ones are denied
    (reason `agent_disabled`), the approved but unused ones stay approved and are returned with
    them; the caller closes every one's held intent."""
    ended = list(ApprovalRepository(session).open_of_agent(principal, org_id=org_id, agent_id=agent_id))
    for approval in ended:
        if approval.status != ApprovalStatus.PENDING:
            continue
        approval.status = ApprovalStatus.DENIED
        approval.decided_at = now
        session.add(approval)
        audit(
            session,
            org_id=approval.org_id,
            type="approval.denied",
            actor=actor,
            agent_id=approval.agent_id,
            subject_id=approval.id,
            data={"reason": "agent_disabled", "intentId": approval.intent_id},
            now=now,
        )
    return ended


def expire_lapsed(session: Session, *, actor: str, now: datetime) -> list[Approval]:
    """Write down the expiry of approvals whose time ran out; the caller closes their intents."""
    repository = ApprovalRepository(session)
    expired: dict[str, Approval] = {}
    for approval in repository.lapsed(now=now, retry_window=RETRY_WINDOW, limit=EXPIRY_BATCH):
        if approval.id in expired:
            continue
        lock_org(session, approval.org_id)
        repository.refresh(approval)
        if (
            effective_status(approval, now) != ApprovalStatus.EXPIRED
            or approval.status == ApprovalStatus.EXPIRED
        ):
            continue
        approval.status = ApprovalStatus.EXPIRED
        if approval.decided_at is None:  # one approved and left unused was timed when approved
            _observe_wait(approval, until=approval.expires_at)
        session.add(approval)
        audit(
            session,
            org_id=approval.org_id,
            type="approval.expired",
            actor=actor,
            agent_id=approval.agent_id,
            subject_id=approval.id,
            data={"intentId": approval.intent_id},
            now=now,
        )
        expired[approval.id] = approval
    return list(expired.values())
