"""The admin API's changes that widen authority: a policy change that raises a cap, adds an
allowed host or drops a denied one, an agent token, a higher role. Each is stored as a pending
change (server/tenancy/changes.py) and answered `202` with the page where a member confirms it
with a passkey; nothing changes until then. Lowering a cap or disabling never waits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.principal import Principal
from server.models import PendingChange
from server.tenancy import changes
from server.tenancy.service import NameTaken, clean_email, find_member, get_agent, has_member_email
from server.vocabulary import PendingChangeKind, Role
from server.web.api.parts import body_of, now_of, path, reading, writing
from server.web.api.schemas import ChangeDocument, ConfirmationRequired, MemberInvite
from server.web.http import NO_STORE, services_of


def ask_for_agent(
    session: Session,
    principal: Principal,
    agent_id: str,
    *,
    kind: PendingChangeKind,
    change: dict[str, Any],
    now: datetime,
) -> PendingChange:
    agent = get_agent(session, principal, agent_id)  # another organisation's is not found
    return changes.ask(session, principal, kind=kind, subject_id=agent.id, change=change, now=now)


def ask_for_member(
    session: Session, principal: Principal, member_id: str, *, change: dict[str, Any], now: datetime
) -> PendingChange:
    assert principal.org_id is not None
    member = find_member(session, principal, member_id, org_id=principal.org_id)
    return changes.ask(
        session, principal, kind=PendingChangeKind.ROLE_CHANGE, subject_id=member.id, change=change, now=now
    )


def ask_to_invite(
    session: Session,
    principal: Principal,
    *,
    email: str,
    role: Role,
    enroll_ttl: int,
    pages_url: str,
    now: datetime,
) -> PendingChange:
    """An invitation waits too: the enrolment link it makes is a credential for a new passkey."""
    assert principal.org_id is not None
    cleaned = clean_email(email)
    if has_member_email(session, principal, email=cleaned, org_id=principal.org_id):
        raise NameTaken(field="email")
    change = {"email": cleaned, "role": str(role), "enrollTtlSeconds": enroll_ttl, "pagesUrl": pages_url}
    return changes.ask(
        session, principal, kind=PendingChangeKind.INVITE, subject_id=principal.org_id, change=change, now=now
    )


def confirmation_required(request: Request, row: PendingChange) -> Response:
    """202, the confirmation page in the body and in `Location`."""
    url = f"{services_of(request).settings.pages_url}{changes.PATH}/{row.id}"
    document = ConfirmationRequired(changeId=row.id, confirmationUrl=url, expiresAt=row.expires_at)
    headers = {**NO_STORE, "Location": url}
    return JSONResponse(document.model_dump(mode="json"), status_code=202, headers=headers)


def _document(session: Session, principal: Principal, change_id: str, *, now: datetime) -> ChangeDocument:
    row = changes.find_change(session, principal, change_id)
    status = (
        "confirmed" if row.confirmed_at is not None else "expired" if row.expires_at <= now else "pending"
    )
    return ChangeDocument(
        id=row.id,
        kind=str(row.kind),
        subjectId=row.subject_id,
        status=status,
        askedBy=row.asked_by,
        confirmedBy=row.confirmed_by,
        createdAt=row.created_at,
        expiresAt=row.expires_at,
        confirmedAt=row.confirmed_at,
    )


async def show_change(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _document, principal, path(request, "change_id"), now=now_of(request))


async def invite_member(request: Request, principal: Principal) -> Response:
    """Invite a member: it waits for a member's passkey (202); the page shows the enrolment link."""
    asked = await body_of(request, MemberInvite)
    settings = services_of(request).settings
    row = await writing(
        request,
        ask_to_invite,
        principal,
        email=asked.email,
        role=asked.role,
        enroll_ttl=settings.enroll_ttl,
        pages_url=settings.pages_url,
        now=now_of(request),
    )
    return confirmation_required(request, row)


async def ask_policy(
    request: Request, principal: Principal, agent_id: str, change: dict[str, Any]
) -> Response:
    row = await writing(
        request,
        ask_for_agent,
        principal,
        agent_id,
        kind=PendingChangeKind.POLICY,
        change=change,
        now=now_of(request),
    )
    return confirmation_required(request, row)
