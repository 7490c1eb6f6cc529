"""The admin API's agent, payment and audit-chain endpoints. Each finds the admin behind the token,
works through the domain services with that principal (so everything is scoped to the token's
organisation), and renders a schema document; every refusal is a problem document."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.principal import Principal
from server.audit.service import ChainBreak, first_broken_link
from server.payments import ledger
from server.payments.decisions import set_agent_disabled
from server.payments.repository import PaymentFilter
from server.tenancy.service import agents, get_agent
from server.vocabulary import IntentStatus
from server.web.api import cursors
from server.web.api.parts import instant, now_of, page_size, path, reading, writing
from server.web.api.problems import Problem
from server.web.api.schemas import AgentDocument, AgentList, AuditVerification, PaymentDocument, PaymentPage


def _agents(session: Session, principal: Principal) -> AgentList:
    return AgentList(agents=[AgentDocument.of(agent) for agent in agents(session, principal)])


def _agent(session: Session, principal: Principal, agent_id: str) -> AgentDocument:
    return AgentDocument.of(get_agent(session, principal, agent_id))


async def list_agents(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _agents, principal)


async def show_agent(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _agent, principal, path(request, "agent_id"))


def _switch_agent(
    session: Session, principal: Principal, agent_id: str, *, disabled: bool, now: datetime
) -> AgentDocument:
    agent = set_agent_disabled(session, principal, agent_id=agent_id, disabled=disabled, now=now)
    return AgentDocument.of(agent)


async def disable_agent(request: Request, principal: Principal) -> BaseModel:
    agent_id = path(request, "agent_id")
    return await writing(request, _switch_agent, principal, agent_id, disabled=True, now=now_of(request))


async def enable_agent(request: Request, principal: Principal) -> BaseModel:
    agent_id = path(request, "agent_id")
    return await writing(request, _switch_agent, principal, agent_id, disabled=False, now=now_of(request))


def payment_status(request: Request) -> IntentStatus | None:
    text = request.query_params.get("status")
    if text is None:
        return None
    if text not in {str(status) for status in IntentStatus}:
        valid = ", ".join(str(status) for status in IntentStatus)
        raise Problem(400, "invalid_input", f"`status` must be one of: {valid}.")
    return IntentStatus(text)


def _payments(
    session: Session,
    principal: Principal,
    only: PaymentFilter,
    *,
    after: tuple[datetime, str] | None,
    limit: int,
) -> PaymentPage:
    if only.agent_id is not None:
        get_agent(session, principal, only.agent_id)  # another organisation's agent is not found
    rows = ledger.payments_page(session, principal, only, after=after, limit=limit + 1)
    shown = rows[:limit]
    more = len(rows) > limit
    next_cursor = cursors.encode(shown[-1].created_at, shown[-1].id) if more and shown else None
    return PaymentPage(payments=[PaymentDocument.of(row) for row in shown], nextCursor=next_cursor)


def payment_filter(request: Request) -> PaymentFilter:
    return PaymentFilter(
        agent_id=request.query_params.get("agent"),
        status=payment_status(request),
        since=instant(request, "since"),
        until=instant(request, "until"),
    )


async def list_payments(request: Request, principal: Principal) -> BaseModel:
    cursor = request.query_params.get("cursor")
    only = payment_filter(request)
    after = cursors.decode(cursor) if cursor else None
    return await reading(request, _payments, principal, only, after=after, limit=page_size(request))


def _verification(session: Session, principal: Principal) -> AuditVerification:
    assert principal.org_id is not None
    broken: ChainBreak | None = first_broken_link(session, principal.org_id)
    if broken is None:
        return AuditVerification(intact=True, brokenAtSeq=None, reason=None)
    return AuditVerification(intact=False, brokenAtSeq=broken.seq, reason=str(broken.reason))


async def verify_audit(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _verification, principal)
