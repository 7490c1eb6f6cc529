"""Create and find organisations, teams, members and agents.

Every lookup takes the principal it is made for and finds only what that principal may read
(see tenancy.repository); names and emails are looked up within one organisation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session

from auth.passkeys import ENROLL_TTL, new_enrollment
from auth.principal import Principal
from auth.sessions import end_sessions_of_member
from server.audit.service import record as audit
from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.kit.ids import new_id
from server.models import Agent, Member, Organization, Team
from server.policy.model import Policy
from server.policy.rulebook import ScopeNotFound, create_default_rules
from server.policy.rules import RuleTarget
from server.policy.service import create_initial_policy, policy_of_version
from server.settings import SUPPORTED_NETWORKS
from server.tenancy.repository import (
    AgentRepository,
    MemberRepository,
    OrganizationRepository,
    TeamRepository,
)
from server.vocabulary import Role, RuleScope
from server.wallets.master_key import require_current_key

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,119}$")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9.-]{1,189}\.[A-Za-z]{2,63}$")
ROLES: tuple[Role, ...] = tuple(Role)
APPROVER_ROLES = frozenset(role for role in Role if role.may_approve)
MIN_APPROVAL_TTL_SECONDS = 5 * 60
MAX_APPROVAL_TTL_SECONDS = 24 * 3600


class OrgNotFound(PaywardenError):
    code = "org_not_found"
    message = "No organisation with that id or name."


class AgentNotFound(PaywardenError):
    code = "agent_not_found"
    message = "No agent with that id or name in this organisation."


class AgentNameAmbiguous(PaywardenError):
    code = "agent_name_ambiguous"
    message = "Agents of several organisations have that name: give the agent's id, or the organisation."


class NameTaken(PaywardenError):
    code = "name_taken"
    message = "That name is already in use."


class TeamNotFound(PaywardenError):
    code = "team_not_found"
    message = "No team with that id or name in this organisation."


class MemberNotFound(PaywardenError):
    code = "member_not_found"
    message = "No member with that id or email in this organisation."


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise InvalidInput(InputReason.INVALID_NAME)
    return name


def create_org(session: Session, *, name: str, actor: str, now: datetime) -> Organization:
    org = Organization(id=new_id("org"), name=_check_name(name), created_at=now)
    if not OrganizationRepository(session).add_unique(org):
        raise NameTaken()
    audit(
        session,
        org_id=org.id,
        type="org.created",
        actor=actor,
        subject_id=org.id,
        data={"name": org.name},
        now=now,
    )
    return org


def find_org(session: Session, principal: Principal, ref: str) -> Organization:
    """By id, or by name."""
    org = OrganizationRepository(session).by_id_or_name(principal, ref)
    if org is None:
        raise OrgNotFound()
    return org


def organisations(session: Session, principal: Principal) -> list[Organization]:
    """Every organisation the principal may read, oldest first."""
    return list(OrganizationRepository(session).all_readable(principal))


def set_approval_ttl(session: Session, *, org: Organization, seconds: int, actor: str, now: datetime) -> None:
    if not MIN_APPROVAL_TTL_SECONDS <= seconds <= MAX_APPROVAL_TTL_SECONDS:
        raise InvalidInput(InputReason.INVALID_APPROVAL_TTL)
    org.approval_ttl_seconds = seconds
    _org_changed(session, org, actor=actor, data={"approvalTtlSeconds": seconds}, now=now)


MAX_CIRCUIT_FAILURES = 100
MAX_CIRCUIT_WINDOW_HOURS = 720


def set_circuit_thresholds(
    session: Session, *, org: Organization, failures: int | None, hours: int | None, actor: str, now: datetime
) -> None:
    """How many paid-but-undelivered outcomes from one host, within how many hours, open its
    circuit for the organisation (the seller circuit breaker); None leaves one as it is."""
    failures = org.circuit_failures if failures is None else failures
    hours = org.circuit_window_hours if hours is None else hours
    if not (1 <= failures <= MAX_CIRCUIT_FAILURES and 1 <= hours <= MAX_CIRCUIT_WINDOW_HOURS):
        raise InvalidInput(InputReason.INVALID_CIRCUIT_THRESHOLD)
    org.circuit_failures, org.circuit_window_hours = failures, hours
    data = {"circuitFailures": failures, "circuitWindowHours": hours}
    _org_changed(session, org, actor=actor, data=data, now=now)


def rename_org(session: Session, *, org: Organization, name: str, actor: str, now: datetime) -> None:
    """Another name for the organisation (names are unique, as when it was created)."""
    cleaned = _check_name(name)
    if cleaned == org.name:
        return
    before = org.name
    if not OrganizationRepository(session).renamed(org_id=org.id, name=cleaned):
        raise NameTaken()
    audit(
        session,
        org_id=org.id,
        type="org.changed",
        actor=actor,
        subject_id=org.id,
        data={"name": cleaned, "before": before},
        now=now,
    )


def set_slack_webhook(
    session: Session,
    *,
    org: Organization,
    sealed: bytes | None,
    key_id: str,
    masked: str | None,
    actor: str,
    now: datetime,
) -> None:
    """Save (or, with None, remove) the organisation's own Slack webhook: sealed, the id of the
    master key it is sealed with (`MasterKey.key_id`), and the masked form pages show; the audit
    event names only the masked form."""
    if sealed is not None:
        require_current_key(session, key_id=key_id)
    org.slack_webhook_sealed = sealed
    org.slack_webhook_key_id = key_id if sealed is not None else None
    org.slack_webhook_masked = masked
    _org_changed(session, org, actor=actor, data={"slackWebhook": masked}, now=now)


def _org_changed(
    session: Session, org: Organization, *, actor: str, data: dict[str, Any], now: datetime
) -> None:
    OrganizationRepository(session).add(org, flush=False)
    audit(session, org_id=org.id, type="org.changed", actor=actor, subject_id=org.id, data=data, now=now)


def members(session: Session, principal: Principal, *, org_id: str) -> list[Member]:
    return list(MemberRepository(session).of_org(principal, org_id=org_id))


def set_member_disabled(
    session: Session, *, member: Member, disabled: bool, actor: str, now: datetime
) -> bool:
    """Disable (or enable) a member; False when it already was. A disabled member's sessions
    end (refused from their next request in every process, and not revived by enabling them
    again) and their passkeys sign nothing in (both read `disabled_at`)."""
    if (member.disabled_at is not None) == disabled:
        return False
    member.disabled_at = now if disabled else None
    MemberRepository(session).add(member, flush=False)
    if disabled:
        end_sessions_of_member(session, member_id=member.id, now=now)
    audit(
        session,
        org_id=member.org_id,
        type="member.disabled" if disabled else "member.enabled",
        actor=actor,
        subject_id=member.id,
        data={"memberId": member.id},
        now=now,
    )
    return True


class LastOwner(PaywardenError):
    code = "last_owner"
    message = "This member is the organisation's last enabled owner: make another member owner first."


def _other_owners(session: Session, principal: Principal, member: Member) -> bool:
    everyone = MemberRepository(session).of_org(principal, org_id=member.org_id)
    return any(
        other.id != member.id and other.role == Role.OWNER and other.disabled_at is None for other in everyone
    )


def set_member_role(
    session: Session, principal: Principal, *, member: Member, role: Role, now: datetime
) -> bool:
    """Give a member another role; False when it already was theirs. The last enabled owner keeps
    the role, so the organisation always has someone who may change it."""
    if member.role == role:
        return False
    if (
        member.role == Role.OWNER
        and member.disabled_at is None
        and not _other_owners(session, principal, member)
    ):
        raise LastOwner()
    before = member.role
    member.role = role
    MemberRepository(session).add(member, flush=False)
    audit(
        session,
        org_id=member.org_id,
        type="member.role_changed",
        actor=principal.actor,
        subject_id=member.id,
        data={"memberId": member.id, "from": str(before), "to": str(role)},
        now=now,
    )
    return True


def teams(session: Session, principal: Principal, *, org_id: str) -> list[Team]:
    return list(TeamRepository(session).of_org(principal, org_id=org_id))


def disabled_now(session: Session, agent: Agent) -> bool:
    """Whether the agent is disabled as the database has it now: under the organisation's lock,
    the truth, whichever session `agent` was read in."""
    return AgentRepository(session).disabled_now(org_id=agent.org_id, agent_id=agent.id)


def set_agent_disabled(session: Session, *, agent: Agent, disabled: bool, actor: str, now: datetime) -> bool:
    """Disable (or enable) an agent; False when it already was. Its tokens are refused from the
    next call in every process: each call reads `disabled_at` with the token."""
    if disabled_now(session, agent) == disabled:
        return False
    agent.disabled_at = now if disabled else None
    AgentRepository(session).add(agent, flush=False)
    audit(
        session,
        org_id=agent.org_id,
        type="agent.disabled" if disabled else "agent.enabled",
        actor=actor,
        agent_id=agent.id,
        subject_id=agent.id,
        data={},
        now=now,
    )
    return True


def create_team(session: Session, *, org: Organization, name: str, actor: str, now: datetime) -> Team:
    team = Team(id=new_id("team"), org_id=org.id, name=_check_name(name), created_at=now)
    if not TeamRepository(session).add_unique(team):
        raise NameTaken()
    audit(
        session,
        org_id=org.id,
        type="team.created",
        actor=actor,
        subject_id=team.id,
        data={"name": team.name},
        now=now,
    )
    return team


def find_team(session: Session, principal: Principal, ref: str, *, org_id: str) -> Team:
    """By id, or by name, within the organisation."""
    team = TeamRepository(session).by_id_or_name(principal, ref, org_id=org_id)
    if team is None:
        raise TeamNotFound()
    return team


@dataclass(frozen=True)
class NewMember:
    member: Member
    enroll_token: str  # shown once, in the enrolment link; only its hash is stored


def parse_role(text: str) -> Role:
    try:
        return Role(text)
    except ValueError as exc:
        raise InvalidInput(InputReason.INVALID_ROLE) from exc


def clean_email(email: str) -> str:
    """A member's email as stored (trimmed, lower case), or invalid_input."""
    cleaned = email.strip().lower()
    if not _EMAIL.match(cleaned):
        raise InvalidInput(InputReason.INVALID_EMAIL)
    return cleaned


def create_member(
    session: Session,
    *,
    org: Organization,
    email: str,
    role: Role,
    actor: str,
    now: datetime,
    enroll_ttl: timedelta = ENROLL_TTL,
) -> NewMember:
    email = clean_email(email)
    enrollment = new_enrollment(now, ttl=enroll_ttl)
    member = Member(
        id=new_id("member"),
        org_id=org.id,
        email=email,
        role=role,
        enroll_token_hash=enrollment.token_hash,
        enroll_expires_at=enrollment.expires_at,
        created_at=now,
    )
    if not MemberRepository(session).add_unique(member):
        raise NameTaken(field="email")
    audit(
        session,
        org_id=org.id,
        type="member.created",
        actor=actor,
        subject_id=member.id,
        data={"role": role},
        now=now,
    )
    return NewMember(member, enrollment.token)


def has_member_email(session: Session, principal: Principal, *, email: str, org_id: str) -> bool:
    """Whether the organisation has a member with this (cleaned) email."""
    member = MemberRepository(session).by_id_or_email(principal, email, org_id=org_id)
    return member is not None and member.email == email


def find_member(session: Session, principal: Principal, ref: str, *, org_id: str) -> Member:
    """By id, or by email, within the organisation."""
    member = MemberRepository(session).by_id_or_email(principal, ref, org_id=org_id)
    if member is None:
        raise MemberNotFound()
    return member


def create_agent(
    session: Session,
    *,
    org: Organization,
    name: str,
    network: str,
    actor: str,
    now: datetime,
    team: Team | None = None,
    member: Member | None = None,
) -> Agent:
    """A new agent with its first policy (which allows no host) and its default weekly rule."""
    if network not in SUPPORTED_NETWORKS:
        raise InvalidInput(InputReason.INVALID_NETWORK)
    if (team is not None and team.org_id != org.id) or (member is not None and member.org_id != org.id):
        raise InvalidInput(InputReason.OUTSIDE_ORGANISATION)
    agent = Agent(
        id=new_id("agent"),
        org_id=org.id,
        name=_check_name(name),
        network=network,
        team_id=team.id if team else None,
        member_id=member.id if member else None,
        created_at=now,
    )
    if not AgentRepository(session).add_unique(agent):
        raise NameTaken()
    audit(
        session,
        org_id=org.id,
        type="agent.created",
        actor=actor,
        agent_id=agent.id,
        subject_id=agent.id,
        data={"name": agent.name, "network": network, "teamId": agent.team_id, "memberId": agent.member_id},
        now=now,
    )
    policy = create_initial_policy(session, agent=agent, actor=actor, now=now)
    create_default_rules(session, agent=agent, daily_cap_usd=policy.daily_cap_usd, actor=actor, now=now)
    return agent


def get_agent(session: Session, principal: Principal, agent_id: str) -> Agent:
    """The agent with this id, if the principal may read it (an agent reads only itself)."""
    agent = AgentRepository(session).get_readable(principal, agent_id)
    if agent is None:
        raise AgentNotFound()
    return agent


def agents(session: Session, principal: Principal, *, org_id: str | None = None) -> list[Agent]:
    """Every agent the principal may see (an organisation's, for its members and admin tokens),
    of `org_id` only when given."""
    return list(AgentRepository(session).all_readable(principal, org_id=org_id))


def agent_with_policy(session: Session, principal: Principal, agent_id: str) -> tuple[Agent, Policy]:
    """`get_agent` and the agent's policy in force, read in one statement (the policy's document
    is parsed once per process per version: versions never change)."""
    found = AgentRepository(session).with_current_policy(principal, agent_id)
    if found is None:
        raise AgentNotFound()
    agent, version_id = found
    return agent, policy_of_version(session, version_id, org_id=agent.org_id)


def find_agent(session: Session, principal: Principal, ref: str, *, org_id: str | None = None) -> Agent:
    """By id, or by name (names are unique within an organisation; one that several organisations
    use needs `org_id` or the id)."""
    repository = AgentRepository(session)
    agent = repository.get_readable(principal, ref)
    if agent is not None and org_id in (None, agent.org_id):
        return agent
    named = repository.named(principal, ref.strip(), org_id=org_id)
    if len(named) > 1:
        raise AgentNameAmbiguous()
    if not named:
        raise AgentNotFound()
    return named[0]


def find_agent_by_name(session: Session, principal: Principal, *, org_id: str, name: str) -> Agent | None:
    return AgentRepository(session).by_name(principal, org_id=org_id, name=name)


def rule_target(session: Session, principal: Principal, scope: RuleScope, ref: str) -> RuleTarget:
    """What a rule of `scope` is for, found by id (an organisation also by name) within the
    principal's reach."""
    found: Organization | Team | Member | Agent | None
    if scope == RuleScope.ORG:
        found = OrganizationRepository(session).by_id_or_name(principal, ref)
        if found is None:
            raise ScopeNotFound()
        return RuleTarget(scope, found.id, found.id)
    if scope == RuleScope.AGENT:
        found = AgentRepository(session).get_readable(principal, ref)
    elif scope == RuleScope.TEAM:
        found = TeamRepository(session).get_readable(principal, ref)
    else:
        found = MemberRepository(session).get_readable(principal, ref)
    if found is None:
        raise ScopeNotFound()
    return RuleTarget(scope, found.id, found.org_id)
