"""Pending changes: what an admin token asks for that widens authority (a policy that raises a
cap, adds an allowed host or drops a denied one; an agent token; a higher role; a new member; a
rule's limit raised or a rule removed) is not made at once.

`ask` stores the change exactly as asked, as canonical JSON with its SHA-256, for ten minutes. A
member with the right role opens its confirmation page, reads it in words, and confirms with a
user-verified passkey whose challenge commits to that hash (a confirmation step-up:
auth/step_up.py). `confirm` then checks the assertion, marks the change confirmed once, and applies
it as made by that member, in one unit of work; its audit event names the token that asked. A new
token's secret (or a new member's enrolment link) is sealed with the master key and shown once, to
that member, on the page.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from sqlmodel import Session

from auth import step_up
from auth.errors import ChallengeExpired
from auth.passkeys import Ceremony, RelyingParty
from auth.principal import Principal
from auth.scopes import Scope
from auth.sessions import SignedIn
from auth.tokens import issue_access_token
from server.audit.service import record as audit
from server.kit.crypto import MasterKey
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Member, PendingChange, StepUp
from server.policy.rulebook import change_rule, remove_rule
from server.policy.service import PolicySettings, update_policy
from server.tenancy.repository import PendingChangeRepository
from server.tenancy.service import create_member, find_member, find_org, get_agent, set_member_role
from server.vocabulary import PendingChangeKind, Role, StepUpAction
from server.wallets.master_key import require_current_key
from server.wallets.sealed import pending_result_context

PENDING_TTL = timedelta(minutes=10)
PATH = "/account/changes"
ROLE_RANK = {Role.VIEWER: 0, Role.APPROVER: 1, Role.ADMIN: 2, Role.OWNER: 3}


class ChangeNotFound(PaywardenError):
    code = "change_not_found"
    message = "There is no such change waiting in your organisation."


class ChangeNotPending(PaywardenError):
    code = "change_not_pending"
    message = "This change was already confirmed, or its ten minutes ran out: nothing more will change."


class ConfirmForbidden(PaywardenError):
    code = "confirm_forbidden"
    message = "Only an owner or admin of the organisation may confirm this change (a new owner: an owner)."


def canonical(document: dict[str, Any]) -> str:
    """One text for one change: sorted keys, no spaces, ASCII only."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def widens_role(before: Role, after: Role) -> bool:
    return ROLE_RANK[after] > ROLE_RANK[before]


def ask(
    session: Session,
    principal: Principal,
    *,
    kind: PendingChangeKind,
    subject_id: str,
    change: dict[str, Any],
    now: datetime,
) -> PendingChange:
    """Store a change an admin token asked for, to wait for a member's passkey."""
    assert principal.org_id is not None  # an admin token is bound to one organisation
    text = canonical(
        {"kind": str(kind), "orgId": principal.org_id, "subjectId": subject_id, "change": change}
    )
    row = PendingChange(
        id=new_id("change"),
        org_id=principal.org_id,
        kind=kind,
        asked_by=principal.actor,
        subject_id=subject_id,
        change_json=text,
        change_hash=hashlib.sha256(text.encode()).hexdigest(),
        created_at=now,
        expires_at=now + PENDING_TTL,
    )
    PendingChangeRepository(session).add(row)
    audit(
        session,
        org_id=row.org_id,
        type="change.asked",
        actor=principal.actor,
        subject_id=row.id,
        data={"changeId": row.id, "kind": str(kind), "subjectId": subject_id, "change": change},
        now=now,
    )
    return row


def change_of(row: PendingChange) -> dict[str, Any]:
    """What was asked (the `change` part of the stored document)."""
    change: dict[str, Any] = json.loads(row.change_json)["change"]
    return change


def status_of(row: PendingChange, *, now: datetime) -> Literal["pending", "confirmed", "expired"]:
    if row.confirmed_at is not None:
        return "confirmed"
    return "expired" if row.expires_at <= now else "pending"


def find_change(session: Session, principal: Principal, change_id: str) -> PendingChange:
    row = (
        PendingChangeRepository(session).get_readable(principal, change_id) if len(change_id) <= 40 else None
    )
    if row is None:
        raise ChangeNotFound()
    return row


def may_confirm(member: Member, row: PendingChange) -> bool:
    if member.org_id != row.org_id or member.disabled_at is not None:
        return False
    if (
        row.kind in (PendingChangeKind.ROLE_CHANGE, PendingChangeKind.INVITE)
        and change_of(row).get("role") == Role.OWNER
    ):
        return member.role == Role.OWNER
    return member.role in (Role.OWNER, Role.ADMIN)


def _confirmable(session: Session, signed_in: SignedIn, change_id: str, *, now: datetime) -> PendingChange:
    row = find_change(session, signed_in.principal, change_id)
    if not may_confirm(signed_in.member, row):
        raise ConfirmForbidden()
    if row.confirmed_at is not None or row.expires_at <= now:
        raise ChangeNotPending()
    return row


def begin_confirmation(
    session: Session, *, rp: RelyingParty, signed_in: SignedIn, change_id: str, now: datetime
) -> Ceremony:
    """A challenge over this change's hash, for one of the confirming member's own passkeys."""
    row = _confirmable(session, signed_in, change_id, now=now)
    return step_up.begin(
        session,
        rp=rp,
        signed_in=signed_in,
        action=StepUpAction.CONFIRM_CHANGE,
        now=now,
        subject=step_up.Subject(row.id, row.change_hash),
    )


def confirm_change(
    session: Session,
    *,
    rp: RelyingParty,
    signed_in: SignedIn,
    change_id: str,
    claimed: StepUp,
    credential: object,
    master: MasterKey,
    now: datetime,
) -> PendingChange:
    """Check the passkey's answer over this change, confirm it once, and apply it as made by the
    confirming member. A new token's secret is sealed into the row for the page to show once."""
    row = _confirmable(session, signed_in, change_id, now=now)
    if claimed.action != StepUpAction.CONFIRM_CHANGE or claimed.pending_change_id != row.id:
        raise ChallengeExpired()
    step_up_id = step_up.complete(
        session,
        rp=rp,
        signed_in=signed_in,
        step_up=claimed,
        credential=credential,
        now=now,
        subject=step_up.Subject(row.id, row.change_hash),
    )
    step_up.redeem(session, step_up_id, signed_in=signed_in, action=StepUpAction.CONFIRM_CHANGE, now=now)
    if not PendingChangeRepository(session).confirm(
        signed_in.principal, row.id, member_id=signed_in.member.id, now=now
    ):
        raise ChangeNotPending()
    applied = _apply_change(session, signed_in, row, now=now)
    if applied is not None:
        require_current_key(session, key_id=master.key_id)
        row.result_sealed = master.seal(applied.encode(), context=_context(row))
        row.result_key_id = master.key_id
    row.confirmed_at, row.confirmed_by = now, signed_in.member.id
    PendingChangeRepository(session).add(row)
    audit(
        session,
        org_id=row.org_id,
        type="change.confirmed",
        actor=signed_in.principal.actor,
        subject_id=row.id,
        data={
            "changeId": row.id,
            "kind": str(row.kind),
            "subjectId": row.subject_id,
            "askedBy": row.asked_by,
            "change": change_of(row),
            "passkeyId": claimed.passkey_id,
        },
        now=now,
    )
    return row


def _context(row: PendingChange) -> str:
    return pending_result_context(row.id)


def policy_settings(change: dict[str, Any]) -> PolicySettings:
    """The policy settings of a change as the API takes them (caps as USD text, host lists)."""
    allow = change.get("allowHosts")
    return PolicySettings(
        max_usd_per_tx=change.get("maxUsdPerTx"),
        daily_cap_usd=change.get("dailyCapUsd"),
        allow_hosts=tuple(allow or ()),
        clear_allow_hosts=allow == [],  # an empty list allows no host at all
        deny_hosts=tuple(change.get("denyHosts") or ()),
    )


def _apply_change(session: Session, signed_in: SignedIn, row: PendingChange, *, now: datetime) -> str | None:
    """Make the change as the member who confirmed it; a new token's secret, else None."""
    principal = signed_in.principal
    change = change_of(row)
    if row.kind == PendingChangeKind.POLICY:
        agent = get_agent(session, principal, row.subject_id)
        update_policy(session, agent=agent, settings=policy_settings(change), actor=principal.actor, now=now)
        return None
    if row.kind == PendingChangeKind.NEW_CREDENTIAL:
        agent = get_agent(session, principal, row.subject_id)
        issued = issue_access_token(
            session,
            org_id=agent.org_id,
            agent_id=agent.id,
            scopes=frozenset(Scope(name) for name in change["scopes"]),
            audience=str(change["audience"]),
            ttl_seconds=int(change["ttlSeconds"]),
            created_by=principal.actor,
            now=now,
            label=change.get("label"),
        )
        return issued.token
    if row.kind == PendingChangeKind.RULE_CHANGE:
        limit = Decimal(str(change["limitUsd"]))
        change_rule(session, principal, rule_id=row.subject_id, limit_usd=limit, now=now)
        return None
    if row.kind == PendingChangeKind.RULE_REMOVAL:
        remove_rule(session, principal, rule_id=row.subject_id, now=now)
        return None
    if row.kind == PendingChangeKind.INVITE:
        created = create_member(
            session,
            org=find_org(session, principal, row.org_id),
            email=str(change["email"]),
            role=Role(change["role"]),
            actor=principal.actor,
            now=now,
            enroll_ttl=timedelta(seconds=int(change["enrollTtlSeconds"])),
        )
        return f"{change['pagesUrl']}/enroll/{created.enroll_token}"
    member = find_member(session, principal, row.subject_id, org_id=row.org_id)
    set_member_role(session, principal, member=member, role=Role(change["role"]), now=now)
    return None


def take_result(session: Session, signed_in: SignedIn, change_id: str, *, master: MasterKey) -> str | None:
    """The secret a confirmed change made (a new token), once, to the member who confirmed it;
    cleared as it is read, so a reload shows it no more."""
    row = find_change(session, signed_in.principal, change_id)
    if row.result_sealed is None or row.confirmed_by != signed_in.member.id:
        return None
    secret = master.open(row.result_sealed, context=_context(row)).decode()
    row.result_sealed = row.result_key_id = None
    PendingChangeRepository(session).add(row)
    return secret
