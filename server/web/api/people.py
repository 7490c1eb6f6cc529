"""The admin API's members and teams: list them; change a member's role; disable and enable one.
A member is looked up by id within the token's organisation, so another's is `member_not_found`."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import Response

from auth.principal import Principal
from server.models import Member
from server.tenancy.changes import widens_role
from server.tenancy.service import find_member, members, set_member_disabled, set_member_role, teams
from server.vocabulary import Role
from server.web.api.confirmations import ask_for_member, confirmation_required
from server.web.api.parts import body_of, now_of, path, reading, writing
from server.web.api.schemas import MemberDocument, MemberList, RoleChange, TeamDocument, TeamList


def _org(principal: Principal) -> str:
    assert principal.org_id is not None  # an admin token is bound to one organisation
    return principal.org_id


def _member(session: Session, principal: Principal, member_id: str) -> Member:
    return find_member(session, principal, member_id, org_id=_org(principal))


def _members(session: Session, principal: Principal) -> MemberList:
    rows = members(session, principal, org_id=_org(principal))
    return MemberList(members=[MemberDocument.of(row) for row in rows])


async def list_members(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _members, principal)


def _switch(
    session: Session, principal: Principal, member_id: str, *, disabled: bool, now: datetime
) -> MemberDocument:
    row = _member(session, principal, member_id)
    set_member_disabled(session, member=row, disabled=disabled, actor=principal.actor, now=now)
    return MemberDocument.of(row)


async def disable_member(request: Request, principal: Principal) -> BaseModel:
    member_id = path(request, "member_id")
    return await writing(request, _switch, principal, member_id, disabled=True, now=now_of(request))


async def enable_member(request: Request, principal: Principal) -> BaseModel:
    member_id = path(request, "member_id")
    return await writing(request, _switch, principal, member_id, disabled=False, now=now_of(request))


def _lower_role(
    session: Session, principal: Principal, member_id: str, *, role: Role, now: datetime
) -> MemberDocument | None:
    """The role change made at once when it lowers (or keeps) the role; None when it raises it."""
    row = _member(session, principal, member_id)
    if widens_role(row.role, role):
        return None
    set_member_role(session, principal, member=row, role=role, now=now)
    return MemberDocument.of(row)


async def change_member(request: Request, principal: Principal) -> BaseModel | Response:
    """A lower role is given at once; a higher one waits for a member's passkey (202)."""
    change = await body_of(request, RoleChange)
    member_id = path(request, "member_id")
    now = now_of(request)
    lowered = await writing(request, _lower_role, principal, member_id, role=change.role, now=now)
    if lowered is not None:
        return lowered
    row = await writing(
        request, ask_for_member, principal, member_id, change={"role": str(change.role)}, now=now
    )
    return confirmation_required(request, row)


def _teams(session: Session, principal: Principal) -> TeamList:
    return TeamList(teams=[TeamDocument.of(row) for row in teams(session, principal, org_id=_org(principal))])


async def list_teams(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _teams, principal)
