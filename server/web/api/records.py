"""The admin API's records: an agent's policy in force, the payments export for accounting (CSV or
JSON, the same rows), and the audit events, filtered and a page at a time."""

from __future__ import annotations

import base64
import csv
import io
from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import Response

from auth.principal import Principal
from server.audit.service import events_page
from server.payments import ledger
from server.payments.repository import PaymentFilter
from server.policy.service import SudoRequired, narrow_policy
from server.tenancy.changes import policy_settings
from server.tenancy.service import agent_with_policy, get_agent
from server.web.api.confirmations import ask_policy
from server.web.api.handlers import payment_filter
from server.web.api.parts import body_of, instant, now_of, page_size, path, reading, writing
from server.web.api.problems import Problem
from server.web.api.schemas import (
    AuditEventDocument,
    AuditEventPage,
    ExportRow,
    PaymentExport,
    PolicyDocument,
    PolicyNarrowing,
)
from server.web.http import NO_STORE

EXPORT_PAGE = 500
EXPORT_COLUMNS = list(ExportRow.model_fields)


def _policy(session: Session, principal: Principal, agent_id: str) -> PolicyDocument:
    agent, policy = agent_with_policy(session, principal, agent_id)
    return PolicyDocument(agentId=agent.id, policyVersion=policy.version, policy=policy.to_document())


async def show_policy(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _policy, principal, path(request, "agent_id"))


def _narrow(
    session: Session, principal: Principal, agent_id: str, asked: PolicyNarrowing, *, now: datetime
) -> PolicyDocument:
    agent = get_agent(session, principal, agent_id)
    settings = policy_settings(asked.model_dump(exclude_none=True))
    policy = narrow_policy(session, agent=agent, settings=settings, actor=principal.actor, now=now)
    return PolicyDocument(agentId=agent.id, policyVersion=policy.version, policy=policy.to_document())


async def change_policy(request: Request, principal: Principal) -> BaseModel | Response:
    """A narrowing is made at once; one that widens waits for a member's passkey (202)."""
    asked = await body_of(request, PolicyNarrowing)
    agent_id = path(request, "agent_id")
    try:
        return await writing(request, _narrow, principal, agent_id, asked, now=now_of(request))
    except SudoRequired:
        return await ask_policy(request, principal, agent_id, asked.model_dump(exclude_none=True))


def _export(session: Session, principal: Principal, only: PaymentFilter) -> PaymentExport:
    if only.agent_id is not None:
        get_agent(session, principal, only.agent_id)  # another organisation's agent is not found
    rows: list[ExportRow] = []
    after: tuple[datetime, str] | None = None
    while True:
        page = ledger.payments_page(session, principal, only, after=after, limit=EXPORT_PAGE)
        rows.extend(ExportRow.of(intent) for intent in page)
        if len(page) < EXPORT_PAGE:
            return PaymentExport(rows=rows)
        after = (page[-1].created_at, page[-1].id)


# A spreadsheet runs a cell that starts with one of these as a formula; a seller's header could.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _csv(export: PaymentExport) -> Response:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows({name: _cell(value) for name, value in row.model_dump().items()} for row in export.rows)
    headers = {**NO_STORE, "Content-Disposition": 'attachment; filename="payments.csv"'}
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)


async def export_payments(request: Request, principal: Principal) -> BaseModel | Response:
    shape = request.query_params.get("format", "json")
    if shape not in {"csv", "json"}:
        raise Problem(400, "invalid_input", "`format` must be csv or json.")
    export = await reading(request, _export, principal, payment_filter(request))
    return _csv(export) if shape == "csv" else export


def _seq_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).rstrip(b"=").decode()


def _before_seq(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()).decode()
        prefix, _, number = text.partition(":")
        if prefix != "seq" or not number.isdigit():
            raise ValueError(cursor)
        return int(number)
    except ValueError as exc:  # bad base64 and bad UTF-8 are ValueErrors too
        raise Problem(400, "invalid_cursor", "The cursor is not one this API gave out.") from exc


def _events(
    session: Session,
    principal: Principal,
    *,
    kind: str | None,
    agent_id: str | None,
    since: datetime | None,
    before_seq: int | None,
    limit: int,
) -> AuditEventPage:
    assert principal.org_id is not None
    if agent_id is not None:
        get_agent(session, principal, agent_id)  # another organisation's agent is not found
    rows = events_page(
        session,
        principal,
        org_id=principal.org_id,
        kind=kind,
        agent_id=agent_id,
        since=since,
        before_seq=before_seq,
        limit=limit + 1,
    )
    shown = rows[:limit]
    next_cursor = _seq_cursor(shown[-1].seq) if len(rows) > limit and shown else None
    return AuditEventPage(events=[AuditEventDocument.of(row) for row in shown], nextCursor=next_cursor)


async def list_audit_events(request: Request, principal: Principal) -> BaseModel:
    cursor = request.query_params.get("cursor")
    kind = request.query_params.get("kind") or None
    if kind is not None and (len(kind) > 60 or not kind.replace(".", "").replace("_", "").isalnum()):
        raise Problem(400, "invalid_input", "`kind` must be an event type such as agent.disabled, or agent.")
    return await reading(
        request,
        _events,
        principal,
        kind=kind,
        agent_id=request.query_params.get("agent"),
        since=instant(request, "since"),
        before_seq=_before_seq(cursor) if cursor else None,
        limit=page_size(request),
    )
