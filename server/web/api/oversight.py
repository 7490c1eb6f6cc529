"""The admin API's connections (OAuth grants: list, revoke), approvals and the policy changes agents
asked for (list, read). Deciding either stays on its passkey page, which each document links to:
no token, an admin's or an agent's, decides anything."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.connections import Connection, connections_of_org, revoke_grant
from auth.principal import Principal
from server.approvals import policy_changes
from server.approvals import service as approvals
from server.kit.money import format_usd
from server.models import Approval, PolicyChangeRequest
from server.vocabulary import ApprovalStatus
from server.web.api.parts import now_of, page_size, path, reading, writing
from server.web.api.problems import Problem
from server.web.api.schemas import (
    ApprovalDocument,
    ApprovalList,
    ConnectionDocument,
    ConnectionList,
    PolicyChangeDocument,
    PolicyChangeList,
    UntrustedText,
)
from server.web.http import services_of


def _connection(item: Connection) -> ConnectionDocument:
    return ConnectionDocument(
        id=item.grant.id,
        clientName=item.client_name,
        clientId=item.client.client_id,
        how=item.how,
        agentId=item.agent.id,
        agentName=item.agent.name,
        scopes=item.grant.scopes.split(),
        grantedBy=item.grant.member_id,
        createdAt=item.grant.created_at,
        lastUsedAt=item.grant.last_used_at,
    )


def _connections(session: Session, principal: Principal) -> ConnectionList:
    return ConnectionList(connections=[_connection(item) for item in connections_of_org(session, principal)])


async def list_connections(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _connections, principal)


def _revoke(session: Session, principal: Principal, grant_id: str, *, now: datetime) -> ConnectionDocument:
    live = {item.grant.id: item for item in connections_of_org(session, principal)}
    revoke_grant(session, principal, grant_id=grant_id, now=now)  # connection_not_found if not live
    return _connection(live[grant_id])


async def revoke_connection(request: Request, principal: Principal) -> BaseModel:
    return await writing(request, _revoke, principal, path(request, "connection_id"), now=now_of(request))


def _approval(row: Approval, *, now: datetime, public_url: str) -> ApprovalDocument:
    return ApprovalDocument(
        id=row.id,
        status=str(approvals.effective_status(row, now)),
        agentId=row.agent_id,
        intentId=row.intent_id,
        amountUsd=format_usd(row.amount_atomic, atomic=True),
        host=row.host,
        resource=row.resource,
        payTo=row.pay_to,
        network=row.network,
        reason=str(row.reason),
        holdReasons=[str(item) for item in row.decision.get("holdReasons") or [row.reason]],
        createdAt=row.created_at,
        expiresAt=approvals.agent_view(row, now).expires_at,
        decidedAt=row.decided_at,
        decidedBy=row.decided_by,
        decideAt=approvals.approval_url(public_url, row.id),
    )


def _approvals(
    session: Session,
    principal: Principal,
    *,
    status: ApprovalStatus | None,
    limit: int,
    now: datetime,
    public_url: str,
) -> ApprovalList:
    assert principal.org_id is not None
    rows = approvals.newest(session, principal, org_id=principal.org_id, status=status, limit=limit)
    return ApprovalList(approvals=[_approval(row, now=now, public_url=public_url) for row in rows])


def _status(request: Request) -> ApprovalStatus | None:
    text = request.query_params.get("status")
    if text is None:
        return None
    if text not in {str(status) for status in ApprovalStatus}:
        valid = ", ".join(str(status) for status in ApprovalStatus)
        raise Problem(400, "invalid_input", f"`status` must be one of: {valid}.")
    return ApprovalStatus(text)


async def list_approvals(request: Request, principal: Principal) -> BaseModel:
    public_url = services_of(request).settings.pages_url
    return await reading(
        request,
        _approvals,
        principal,
        status=_status(request),
        limit=page_size(request),
        now=now_of(request),
        public_url=public_url,
    )


def _one(
    session: Session, principal: Principal, approval_id: str, *, now: datetime, public_url: str
) -> ApprovalDocument:
    return _approval(approvals.get(session, principal, approval_id), now=now, public_url=public_url)


async def show_approval(request: Request, principal: Principal) -> BaseModel:
    public_url = services_of(request).settings.pages_url
    approval_id = path(request, "approval_id")
    return await reading(request, _one, principal, approval_id, now=now_of(request), public_url=public_url)


def _policy_change(row: PolicyChangeRequest, *, now: datetime, public_url: str) -> PolicyChangeDocument:
    return PolicyChangeDocument(
        id=row.id,
        status=str(policy_changes.effective_status(row, now)),
        agentId=row.agent_id,
        change=policy_changes.requested(row).document(),
        note=UntrustedText(untrusted=True, text=row.note),
        policyVersion=row.policy_version,
        appliedPolicyVersion=row.applied_version,
        createdAt=row.created_at,
        expiresAt=row.expires_at,
        decidedAt=row.decided_at,
        decidedBy=row.decided_by,
        decideAt=policy_changes.manage_url(public_url, row.id),
    )


def _policy_changes(
    session: Session,
    principal: Principal,
    *,
    agent_id: str | None,
    limit: int,
    now: datetime,
    public_url: str,
) -> PolicyChangeList:
    assert principal.org_id is not None
    rows = policy_changes.newest_of_org(
        session, principal, org_id=principal.org_id, agent_id=agent_id, limit=limit
    )
    return PolicyChangeList(
        policyChanges=[_policy_change(row, now=now, public_url=public_url) for row in rows]
    )


async def list_policy_changes(request: Request, principal: Principal) -> BaseModel:
    return await reading(
        request,
        _policy_changes,
        principal,
        agent_id=request.query_params.get("agent"),
        limit=page_size(request),
        now=now_of(request),
        public_url=services_of(request).settings.pages_url,
    )


def _one_policy_change(
    session: Session, principal: Principal, change_id: str, *, now: datetime, public_url: str
) -> PolicyChangeDocument:
    row = policy_changes.get_request(session, principal, change_id)
    return _policy_change(row, now=now, public_url=public_url)


async def show_policy_change(request: Request, principal: Principal) -> BaseModel:
    return await reading(
        request,
        _one_policy_change,
        principal,
        path(request, "change_id"),
        now=now_of(request),
        public_url=services_of(request).settings.pages_url,
    )
