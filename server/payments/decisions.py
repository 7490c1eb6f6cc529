"""Deciding and expiring held payments: the approval changes, and its intent follows.

Approvals know nothing of intents; a held intent is closed here when a person denies its
approval or the approval lapses, in the same transaction, so the two never disagree.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from auth.passkeys import RelyingParty
from auth.principal import Principal
from server.approvals import policy_changes
from server.approvals import service as approvals
from server.kit.db import lock_org
from server.models import Agent, Approval, Member, MemberPasskey, WebAuthnChallenge
from server.payments.errors import AgentDisabled
from server.payments.ledger import close_held
from server.payments.repository import IntentRepository
from server.tenancy import service as tenancy
from server.tenancy.service import get_agent
from server.vocabulary import ApprovalStatus, IntentStatus, PaymentSender


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
    """A member approves or denies a held payment; a denial closes the held intent at once."""
    approval = approvals.decide_break_glass(
        session, principal, approval_id=approval_id, approve=approve, member_ref=member_ref, via=via, now=now
    )
    if not approve:
        close_held(
            session,
            principal,
            approval=approval,
            to=IntentStatus.FAILED,
            failure_code="approval_denied",
            now=now,
        )
    return approval


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
    """A signed-in member's decision on the approval page, confirmed with their passkey over a
    challenge bound to this payment; a denial closes the held intent at once."""
    approval, passkey = approvals.decide_with_passkey(
        session,
        principal,
        member=member,
        approval_id=approval_id,
        challenge=challenge,
        credential=credential,
        rp=rp,
        now=now,
    )
    if approval.status == ApprovalStatus.DENIED:
        close_held(
            session,
            principal,
            approval=approval,
            to=IntentStatus.FAILED,
            failure_code="approval_denied",
            now=now,
        )
    return approval, passkey


def set_agent_disabled(
    session: Session, principal: Principal, *, agent_id: str, disabled: bool, now: datetime
) -> Agent:
    """Disable or enable an agent at once. Disabling also denies its pending approvals, closes
    every held payment that could still pay (`agent_disabled`) and rejects the policy changes it
    asked for that still wait, under the organisation's lock, so no reservation of the agent's slips
    in between: the ledger refuses one for a disabled agent."""
    agent = get_agent(session, principal, agent_id)
    lock_org(session, agent.org_id)
    if not tenancy.set_agent_disabled(
        session, agent=agent, disabled=disabled, actor=principal.actor, now=now
    ):
        return agent
    if disabled:
        ended = approvals.end_for_disabled_agent(
            session, principal, agent_id=agent.id, org_id=agent.org_id, actor=principal.actor, now=now
        )
        for approval in ended:
            close_held(
                session,
                principal,
                approval=approval,
                to=IntentStatus.FAILED,
                failure_code="agent_disabled",
                now=now,
            )
        policy_changes.end_for_disabled_agent(
            session, principal, agent_id=agent.id, org_id=agent.org_id, actor=principal.actor, now=now
        )
    return agent


def ended_by_disabling(session: Session, principal: Principal, *, among: list[Approval]) -> set[str]:
    """The ids of these approvals whose held payment was closed because its agent was disabled:
    denied then if pending, or approved but not yet used (the approval itself says neither)."""
    intent_ids = {approval.intent_id: approval.id for approval in among}
    closed = IntentRepository(session).failed_with(
        principal, intent_ids=intent_ids.keys(), failure_code=AgentDisabled.code
    )
    return {intent_ids[intent_id] for intent_id in closed}


def handed_to_agent(session: Session, principal: Principal, *, among: list[Approval]) -> set[str]:
    """The ids of these approvals whose payment the agent sends itself (pay_x402): approved, it is
    signed and handed over, and Paywarden never sees it paid."""
    intent_ids = {approval.intent_id: approval.id for approval in among}
    handed = IntentRepository(session).sent_by(
        principal, intent_ids=intent_ids.keys(), sender=PaymentSender.AGENT
    )
    return {intent_ids[intent_id] for intent_id in handed}


def expire_lapsed(session: Session, principal: Principal, *, now: datetime) -> list[Approval]:
    """Expire lapsed approvals and the held intents that waited on them."""
    expired = approvals.expire_lapsed(session, actor=principal.actor, now=now)
    for approval in expired:
        close_held(
            session,
            principal,
            approval=approval,
            to=IntentStatus.EXPIRED,
            failure_code="approval_expired",
            now=now,
        )
    return expired
