"""Create and find organisations and agents. Every lookup is scoped to one organisation."""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from server.audit.service import record as audit
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, Organization
from server.policy.service import create_initial_policy
from server.settings import SUPPORTED_NETWORKS

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,119}$")


class OrgNotFound(PaywardenError):
    code = "org_not_found"
    message = "No organisation with that id or name."


class AgentNotFound(PaywardenError):
    code = "agent_not_found"
    message = "No agent with that id in this organisation."


class NameTaken(PaywardenError):
    code = "name_taken"
    message = "That name is already in use."


def _check_name(name: str) -> str:
    name = name.strip()
    if not _NAME.match(name):
        raise PaywardenError(
            "invalid_input", "Names are 1 to 120 letters, digits, spaces, dots, underscores or dashes."
        )
    return name


def create_org(session: Session, *, name: str, actor: str, now: datetime) -> Organization:
    org = Organization(id=new_id("org"), name=_check_name(name), created_at=now)
    session.add(org)
    try:
        session.flush()
    except IntegrityError as exc:
        raise NameTaken() from exc
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


def create_agent(
    session: Session, *, org: Organization, name: str, network: str, actor: str, now: datetime
) -> Agent:
    if network not in SUPPORTED_NETWORKS:
        raise PaywardenError("invalid_input", f"The network must be one of {', '.join(SUPPORTED_NETWORKS)}.")
    agent = Agent(id=new_id("agent"), org_id=org.id, name=_check_name(name), network=network, created_at=now)
    session.add(agent)
    try:
        session.flush()
    except IntegrityError as exc:
        raise NameTaken() from exc
    audit(
        session,
        org_id=org.id,
        type="agent.created",
        actor=actor,
        agent_id=agent.id,
        subject_id=agent.id,
        data={"name": agent.name, "network": network},
        now=now,
    )
    create_initial_policy(session, agent=agent, actor=actor, now=now)
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
