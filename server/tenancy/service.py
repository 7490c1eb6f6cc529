"""Create and find organisations, teams, members and agents. Every lookup is scoped to one
organisation."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, select

from auth.principal import Principal
from server.audit.service import record as audit
from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.kit.ids import new_id
from server.models import Agent, Member, Organization, Team
from server.policy.rule_service import create_default_rules
from server.policy.service import create_initial_policy
from server.settings import SUPPORTED_NETWORKS

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,119}$")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9.-]{1,189}\.[A-Za-z]{2,63}$")
ROLES = ("owner", "admin", "approver", "viewer")
APPROVER_ROLES = frozenset({"owner", "admin", "approver"})
ENROLL_PREFIX = "pw_en_"
ENROLL_TTL = timedelta(days=7)
MIN_APPROVAL_TTL_SECONDS = 5 * 60
MAX_APPROVAL_TTL_SECONDS = 24 * 3600


class OrgNotFound(PaywardenError):
    code = "org_not_found"
    message = "No organisation with that id or name."


class AgentNotFound(PaywardenError):
    code = "agent_not_found"
    message = "No agent with that id in this organisation."


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


def _insert_unique(session: Session, row: SQLModel, taken: PaywardenError) -> None:
    """Insert `row`; a unique name (or email) already in use raises `taken`, nothing else."""
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError as exc:
        raise taken from exc


def create_org(session: Session, *, name: str, actor: str, now: datetime) -> Organization:
    org = Organization(id=new_id("org"), name=_check_name(name), created_at=now)
    _insert_unique(session, org, NameTaken())
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


def find_org(session: Session, ref: str) -> Organization:
    org = (
        session.get(Organization, ref)
        or session.exec(select(Organization).where(Organization.name == ref)).first()
    )
    if org is None:
        raise OrgNotFound()
    return org


def set_approval_ttl(session: Session, *, org: Organization, seconds: int, actor: str, now: datetime) -> None:
    if not MIN_APPROVAL_TTL_SECONDS <= seconds <= MAX_APPROVAL_TTL_SECONDS:
        raise InvalidInput(InputReason.INVALID_APPROVAL_TTL)
    org.approval_ttl_seconds = seconds
    session.add(org)
    audit(
        session,
        org_id=org.id,
        type="org.changed",
        actor=actor,
        subject_id=org.id,
        data={"approvalTtlSeconds": seconds},
        now=now,
    )


def create_team(session: Session, *, org: Organization, name: str, actor: str, now: datetime) -> Team:
    team = Team(id=new_id("team"), org_id=org.id, name=_check_name(name), created_at=now)
    _insert_unique(session, team, NameTaken())
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


def find_team(session: Session, ref: str, *, org_id: str) -> Team:
    team = (
        session.get(Team, ref)
        or session.exec(select(Team).where(Team.org_id == org_id, Team.name == ref)).first()
    )
    if team is None or team.org_id != org_id:
        raise TeamNotFound()
    return team


@dataclass(frozen=True)
class NewMember:
    member: Member
    enroll_token: str  # shown once, in the enrolment link; only its hash is stored


def hash_enroll_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_member(
    session: Session, *, org: Organization, email: str, role: str, actor: str, now: datetime
) -> NewMember:
    email = email.strip().lower()
    if not _EMAIL.match(email):
        raise InvalidInput(InputReason.INVALID_EMAIL)
    if role not in ROLES:
        raise InvalidInput(InputReason.INVALID_ROLE)
    token = ENROLL_PREFIX + secrets.token_urlsafe(32)
    member = Member(
        id=new_id("member"),
        org_id=org.id,
        email=email,
        role=role,
        enroll_token_hash=hash_enroll_token(token),
        enroll_expires_at=now + ENROLL_TTL,
        created_at=now,
    )
    _insert_unique(session, member, NameTaken(field="email"))
    audit(
        session,
        org_id=org.id,
        type="member.created",
        actor=actor,
        subject_id=member.id,
        data={"role": role},
        now=now,
    )
    return NewMember(member, token)


def get_agent(session: Session, principal: Principal, agent_id: str) -> Agent:
    agent = session.get(Agent, agent_id)
    if agent is None or not (principal.unrestricted or agent.org_id == principal.org_id):
        raise AgentNotFound()
    if principal.agent_id is not None and agent.id != principal.agent_id:
        raise AgentNotFound()
    return agent


def find_member(
    session: Session, principal: Principal | str, ref: str | None = None, *, org_id: str | None = None
) -> Member:
    """By id, or by email within an organisation."""
    if isinstance(principal, str):
        ref = principal
    assert ref is not None
    member = session.get(Member, ref)
    if member is None and org_id is not None:
        member = session.exec(
            select(Member).where(Member.org_id == org_id, Member.email == ref.strip().lower())
        ).first()
    if member is None or (org_id is not None and member.org_id != org_id):
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
    _insert_unique(session, agent, NameTaken())
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


def find_agent(session: Session, ref: str, *, org_id: str | None = None) -> Agent:
    """By id, or by name within an organisation."""
    agent = session.get(Agent, ref)
    if agent is None and org_id is not None:
        agent = session.exec(select(Agent).where(Agent.org_id == org_id, Agent.name == ref)).first()
    if agent is None or (org_id is not None and agent.org_id != org_id):
        raise AgentNotFound()
    return agent


def find_agent_by_name(session: Session, *, org_id: str, name: str) -> Agent | None:
    return session.exec(select(Agent).where(Agent.org_id == org_id, Agent.name == name)).first()
