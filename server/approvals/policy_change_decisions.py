"""A member's decision on a policy change an agent asked for, confirmed with a passkey.

Only an owner or admin of the agent's organisation decides. `start_change_decision` hands out a
WebAuthn challenge that commits to the decision, the request, the SHA-256 of the change as stored,
the versions it would change as they are in force (the agent's policy version and each named
rule's: the `basis`) and a single-use nonce kept in the database
(server/approvals/confirmation.py). The page sends the basis it showed, so a policy changed while
the page was open is refused before any passkey is asked for. `decide_change_with_passkey`
recomputes the challenge from the rows as they are when the answer comes, so an edited change, a
policy or rule changed meanwhile, or another decision does not verify; then, approved, it makes
the change as that member (a new policy version, new rule versions, each with its audit event) in
the same unit of work as the decision, or, rejected, changes nothing. No MCP tool reaches this.
"""

from __future__ import annotations

import hmac
from datetime import datetime
from decimal import Decimal

from sqlmodel import Session

from auth.errors import ChallengeExpired, PasskeyCheckFailed
from auth.passkeys import Ceremony, RelyingParty, confirmation_options, verify_confirmation
from auth.principal import Principal
from server.approvals.confirmation import change_hash, new_nonce, policy_change_challenge_for
from server.approvals.errors import (
    PolicyChangeAltered,
    PolicyChangedMeanwhile,
    PolicyChangeForbidden,
    PolicyChangeNotPending,
    PolicyChangeOutdated,
)
from server.approvals.policy_changes import effective_status, for_member, may_decide, requested
from server.approvals.repository import PolicyChangeRepository
from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.money import atomic_to_usd
from server.models import Agent, Member, PolicyChangeRequest, WebAuthnChallenge
from server.policy.requested_changes import ChangeRequestError, RequestedChange
from server.policy.rulebook import change_rule, remove_rule, rules_for_agent
from server.policy.service import PolicyChanges, current_policy, set_policy
from server.tenancy.service import get_agent
from server.vocabulary import ChallengePurpose, PolicyChangeStatus

PURPOSES = {True: ChallengePurpose.APPROVE_POLICY_CHANGE, False: ChallengePurpose.REJECT_POLICY_CHANGE}


def basis_of(session: Session, agent: Agent, change: RequestedChange, *, now: datetime) -> str:
    """The versions a change would change, as they are in force: the agent's policy version and
    each rule it names (`none` for a rule no longer in force)."""
    versions = {rule.id: rule.version for rule in rules_for_agent(session, agent, now=now)}
    parts = [f"policy:{current_policy(session, agent).version}"]
    parts += [f"{rule_id}:{versions.get(rule_id, 'none')}" for rule_id in sorted(change.rule_ids)]
    return ";".join(parts)


def still_wider(session: Session, agent: Agent, change: RequestedChange, *, now: datetime) -> bool:
    """Whether the change still gives the agent more room than its policy and rules do now."""
    try:
        change.check_wider(
            current_policy(session, agent),
            {rule.id: rule for rule in rules_for_agent(session, agent, now=now)},
        )
    except ChangeRequestError:
        return False
    return True


def _decidable(
    session: Session, principal: Principal, *, member: Member, request_id: str, approve: bool, now: datetime
) -> tuple[PolicyChangeRequest, Agent, RequestedChange]:
    """The request, its agent and its change, when `member` may decide it now."""
    row = for_member(session, principal, member=member, request_id=request_id)
    if not may_decide(member):
        raise PolicyChangeForbidden()
    lock_org(session, row.org_id)
    PolicyChangeRepository(session).refresh(row)
    status = effective_status(row, now)
    if status != PolicyChangeStatus.PENDING:
        raise PolicyChangeNotPending(status=str(status))
    if change_hash(row.change_json) != row.change_hash:
        raise PolicyChangeAltered()
    change = requested(row)
    agent = get_agent(session, principal, row.agent_id)
    if approve and not still_wider(session, agent, change, now=now):
        raise PolicyChangeOutdated()
    return row, agent, change


def start_change_decision(
    session: Session,
    principal: Principal,
    *,
    member: Member,
    request_id: str,
    approve: bool,
    seen_basis: object,
    rp: RelyingParty,
    now: datetime,
) -> Ceremony:
    """A passkey ceremony whose challenge commits to this decision on this change, over the
    versions the page showed (`seen_basis`), and to a new single-use nonce."""
    row, agent, change = _decidable(
        session, principal, member=member, request_id=request_id, approve=approve, now=now
    )
    basis = basis_of(session, agent, change, now=now)
    if seen_basis != basis:
        raise PolicyChangedMeanwhile()
    nonce = new_nonce()
    return confirmation_options(
        session,
        rp=rp,
        member=member,
        purpose=PURPOSES[approve],
        challenge=policy_change_challenge_for(row, approve=approve, basis=basis, nonce=nonce),
        policy_change_id=row.id,
        nonce=nonce,
        now=now,
    )


def decide_change_with_passkey(
    session: Session,
    principal: Principal,
    *,
    member: Member,
    request_id: str,
    challenge: WebAuthnChallenge,
    credential: object,
    rp: RelyingParty,
    now: datetime,
) -> PolicyChangeRequest:
    """A member's decision on the request's page, confirmed by their passkey.

    `challenge` was claimed (used up) by the caller in a unit of work of its own. The challenge is
    recomputed here from the rows as they are now and the nonce kept with it, so the passkey must
    have signed exactly this decision on exactly this change over exactly these versions."""
    if (
        challenge.member_id != member.id
        or challenge.policy_change_id != request_id
        or challenge.nonce is None
        or challenge.purpose not in PURPOSES.values()
    ):
        raise ChallengeExpired()
    approve = challenge.purpose is ChallengePurpose.APPROVE_POLICY_CHANGE
    row, agent, change = _decidable(
        session, principal, member=member, request_id=request_id, approve=approve, now=now
    )
    expected = policy_change_challenge_for(
        row, approve=approve, basis=basis_of(session, agent, change, now=now), nonce=challenge.nonce
    )
    if not hmac.compare_digest(expected, challenge.challenge):
        raise PasskeyCheckFailed()
    passkey = verify_confirmation(
        session, rp=rp, member=member, expected_challenge=expected, credential=credential, now=now
    )
    applied = _make(session, principal, agent, change, now=now) if approve else None
    row.status = PolicyChangeStatus.APPROVED if approve else PolicyChangeStatus.REJECTED
    row.decided_at, row.decided_by, row.applied_version = now, member.id, applied
    PolicyChangeRepository(session).add(row)
    audit(
        session,
        org_id=row.org_id,
        type=f"policy_change.{row.status}",
        actor=principal.actor,
        agent_id=row.agent_id,
        subject_id=row.id,
        data={
            "policyChangeId": row.id,
            "memberId": member.id,
            "role": str(member.role),
            "via": "policy_change_page",
            "passkeyId": passkey.id,
            "credentialId": passkey.credential_id,
            "passkeyName": passkey.name,
            "challengeId": challenge.id,
            "change": change.document(),
            "askedBy": row.asked_by,
            "policyVersion": applied,
        },
        now=now,
    )
    return row


def _make(
    session: Session, principal: Principal, agent: Agent, change: RequestedChange, *, now: datetime
) -> int | None:
    """Make the change as the deciding member: the policy's next version (its number, or None
    when the change names only rules) and each named rule's next version."""
    version = None
    if change.touches_policy:
        after = change.policy_after(current_policy(session, agent))
        # Every setting as it is to be: `set_policy` writes exactly `after` (a threshold of None
        # removes it, which is what `after` says).
        changes = PolicyChanges(
            allow_hosts=after.allow_hosts,
            deny_hosts=after.deny_hosts,
            max_usd_per_tx=after.max_usd_per_tx,
            daily_cap_usd=after.daily_cap_usd,
            step_up_threshold_usd=after.step_up_threshold_usd,
            networks=after.networks,
            pay_to_deny=after.pay_to_deny,
            velocity=after.velocity,
            allow_catalog_hosts=after.allow_catalog_hosts,
            verified_sellers_only=after.verified_sellers_only,
        )
        version = set_policy(session, agent=agent, changes=changes, actor=principal.actor, now=now).version
    for rule_id, limit in change.raise_rule_limits:
        change_rule(session, principal, rule_id=rule_id, limit_usd=Decimal(atomic_to_usd(limit)), now=now)
    for rule_id in change.remove_rules:
        remove_rule(session, principal, rule_id=rule_id, now=now)
    return version
