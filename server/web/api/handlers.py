"""The admin API's read endpoints. Each finds the admin behind the token, reads through the domain
services with that principal (so every read is scoped to the token's organisation), and renders a
schema document; every refusal is a problem document."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.principal import Principal
from server.audit.service import ChainBreak, first_broken_link
from server.payments import ledger
from server.payments.decisions import set_agent_disabled
from server.payments.repository import PaymentFilter
from server.tenancy.service import AgentNotFound, agents, get_agent
from server.vocabulary import IntentStatus
from server.web.api import cursors
from server.web.api.access import admin_principal
from server.web.api.problems import Problem
from server.web.api.schemas import AgentDocument, AgentList, AuditVerification, PaymentDocument, PaymentPage
from server.web.http import NO_STORE, services_of

log = logging.getLogger(__name__)

MAX_PAGE = 200
DEFAULT_PAGE = 50

P = ParamSpec("P")
T = TypeVar("T")
Handler = Callable[[Request, Principal], Awaitable[BaseModel | Response]]
M = TypeVar("M", bound=BaseModel)


def endpoint(handler: Handler, *, write: bool, status: int = 200) -> Callable[[Request], Awaitable[Response]]:
    """A route: the admin's principal first (admin:write for a change), the document as JSON,
    every error a problem."""

    async def answer(request: Request) -> Response:
        try:
            principal = await admin_principal(request, write=write)
            document = await handler(request, principal)
        except Problem as problem:
            return problem.response()
        except Exception:
            log.exception("admin API %s %s failed", request.method, request.url.path)
            return Problem(
                500, "internal_error", "The server failed to answer; nothing was changed."
            ).response()
        if isinstance(document, Response):
            return document
        return JSONResponse(document.model_dump(mode="json"), status_code=status, headers=NO_STORE)

    return answer


async def body_of(request: Request, model: type[M]) -> M:
    """The request's JSON body as `model`, or a 400 problem that says what is wrong."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise Problem(400, "invalid_body", f"The body is not valid at `{where}`: {first['msg']}.") from exc


def _agents(session: Session, principal: Principal) -> AgentList:
    return AgentList(agents=[AgentDocument.of(agent) for agent in agents(session, principal)])


def _agent(session: Session, principal: Principal, agent_id: str) -> AgentDocument:
    try:
        return AgentDocument.of(get_agent(session, principal, agent_id))
    except AgentNotFound as exc:
        raise Problem.of(exc, 404) from exc


async def _reading(
    request: Request, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    return await services_of(request).db.reading(fn, *args, **kwargs)


async def list_agents(request: Request, principal: Principal) -> BaseModel:
    return await _reading(request, _agents, principal)


async def show_agent(request: Request, principal: Principal) -> BaseModel:
    return await _reading(request, _agent, principal, str(request.path_params["agent_id"]))


async def _writing(
    request: Request, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    return await services_of(request).db.writing(fn, *args, **kwargs)


def _switch_agent(
    session: Session, principal: Principal, agent_id: str, *, disabled: bool, now: datetime
) -> AgentDocument:
    try:
        agent = set_agent_disabled(session, principal, agent_id=agent_id, disabled=disabled, now=now)
    except AgentNotFound as exc:
        raise Problem.of(exc, 404) from exc
    return AgentDocument.of(agent)


async def disable_agent(request: Request, principal: Principal) -> BaseModel:
    agent_id, now = str(request.path_params["agent_id"]), services_of(request).clock.now()
    return await _writing(request, _switch_agent, principal, agent_id, disabled=True, now=now)


async def enable_agent(request: Request, principal: Principal) -> BaseModel:
    agent_id, now = str(request.path_params["agent_id"]), services_of(request).clock.now()
    return await _writing(request, _switch_agent, principal, agent_id, disabled=False, now=now)


def _instant(request: Request, name: str) -> datetime | None:
    text = request.query_params.get(name)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise Problem(400, "invalid_input", f"`{name}` must be an ISO 8601 time.") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _page_size(request: Request) -> int:
    text = request.query_params.get("limit")
    if text is None:
        return DEFAULT_PAGE
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE:
        raise Problem(400, "invalid_input", f"`limit` must be a whole number from 1 to {MAX_PAGE}.")
    return int(text)


def _status(request: Request) -> IntentStatus | None:
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
        _agent(session, principal, only.agent_id)  # another organisation's agent is not found
    rows = ledger.payments_page(session, principal, only, after=after, limit=limit + 1)
    shown = rows[:limit]
    more = len(rows) > limit
    next_cursor = cursors.encode(shown[-1].created_at, shown[-1].id) if more and shown else None
    return PaymentPage(payments=[PaymentDocument.of(row) for row in shown], nextCursor=next_cursor)


async def list_payments(request: Request, principal: Principal) -> BaseModel:
    cursor = request.query_params.get("cursor")
    only = PaymentFilter(
        agent_id=request.query_params.get("agent"),
        status=_status(request),
        since=_instant(request, "since"),
        until=_instant(request, "until"),
    )
    after = cursors.decode(cursor) if cursor else None
    return await _reading(request, _payments, principal, only, after=after, limit=_page_size(request))


def _verification(session: Session, principal: Principal) -> AuditVerification:
    assert principal.org_id is not None
    broken: ChainBreak | None = first_broken_link(session, principal.org_id)
    if broken is None:
        return AuditVerification(intact=True, brokenAtSeq=None, reason=None)
    return AuditVerification(intact=False, brokenAtSeq=broken.seq, reason=str(broken.reason))


async def verify_audit(request: Request, principal: Principal) -> BaseModel:
    return await _reading(request, _verification, principal)
