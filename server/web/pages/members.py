"""/admin/members: the organisation's members (email, role, passkeys, last sign-in, disabled),
inviting one (an enrolment link, shown once), changing a role, and disabling or enabling one.

Owners and admins manage members; only an owner gives or takes the owner role, and nobody
disables themselves, so an organisation always keeps an owner who can sign in. Inviting and
raising a role widen authority and wait for sudo (a fresh passkey assertion); lowering a role and
disabling a member never wait. A disabled member's sessions end at once and their passkeys sign
nothing in (server/tenancy/service.py, `set_member_disabled`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlmodel import Session
from starlette.responses import Response

from auth.sessions import SignedIn, member_activity
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.models import Member
from server.tenancy.service import (
    MemberNotFound,
    NameTaken,
    clean_email,
    create_member,
    find_member,
    find_org,
    members,
    parse_role,
    set_member_disabled,
    set_member_role,
)
from server.vocabulary import Role
from server.web.pages.authority import may_manage_members, refused, widens
from server.web.pages.common import Visit, status_of
from server.web.pages.sudo import has_fresh_sudo, sudo_url

PATH = "/admin/members"
ROLE_WORDS = {
    Role.OWNER: "Owner: everything, settings and owners included",
    Role.ADMIN: "Admin: agents, policies, tokens and members",
    Role.APPROVER: "Approver: decides held payments",
    Role.VIEWER: "Viewer: sees everything, changes nothing",
}
DONE = {
    "role": "The member's role was changed.",
    "disabled": "The member was disabled: their sessions ended and their passkeys no longer sign in.",
    "enabled": "The member was enabled: they can sign in with their passkeys again.",
}
NOT_MANAGER = "Only an owner or an admin of your organisation can invite, change or disable members."
NOT_OWNER = "Only an owner can give or take the owner role, or disable an owner."
NOT_YOURSELF = "You cannot disable yourself: ask another owner or admin."
EMAIL_TAKEN = "A member with this email is already in your organisation."


@dataclass(frozen=True)
class MemberView:
    id: str
    email: str
    role: Role
    passkeys: int
    last_sign_in: datetime | None
    enrolled: bool
    disabled: bool
    you: bool


async def _needs_sudo(visit: Visit) -> bool:
    """Whether this session must first answer a fresh passkey assertion (sudo) before a change
    that widens authority."""
    return not await has_fresh_sudo(visit)


def _roster(session: Session, signed_in: SignedIn) -> tuple[str, list[MemberView]]:
    """The organisation's name and its members as the page lists them, oldest first."""
    principal = signed_in.principal
    org = find_org(session, principal, signed_in.member.org_id)
    activity = member_activity(session, principal, org_id=org.id)
    shown = []
    for row in members(session, principal, org_id=org.id):
        seen = activity.get(row.id)
        shown.append(
            MemberView(
                id=row.id,
                email=row.email,
                role=row.role,
                passkeys=seen.passkeys if seen else 0,
                last_sign_in=seen.last_sign_in if seen else None,
                enrolled=row.enroll_token_hash is None,
                disabled=row.disabled_at is not None,
                you=row.id == signed_in.member.id,
            )
        )
    return org.name, shown


async def _render(
    visit: Visit,
    *,
    status: int = 200,
    error: str | None = None,
    invited: tuple[str, str, str] | None = None,
    form: dict[str, str] | None = None,
) -> Response:
    services = visit.services
    signed_in = visit.member
    org_name, shown = await services.db.reading(_roster, signed_in)
    manager = may_manage_members(signed_in.member)
    offered = [role for role in Role if signed_in.member.role is Role.OWNER or role is not Role.OWNER]
    context: dict[str, Any] = {
        "title": "Members",
        "nav": "members",
        "org_name": org_name,
        "members": shown,
        "may_manage": manager,
        "is_owner": signed_in.member.role is Role.OWNER,
        "roles": list(Role),
        "offered_roles": offered,
        "role_words": ROLE_WORDS,
        "invited": invited,
        "form": form or {},
        "error": error,
        "notice": DONE.get(visit.request.query_params.get("done", "")),
    }
    return visit.render("members.html", context, status=status)


async def show(visit: Visit) -> Response:
    return await _render(visit)


def _invite(
    session: Session, signed_in: SignedIn, *, email: str, role: Role, ttl: timedelta, now: datetime
) -> tuple[Member, str]:
    org = find_org(session, signed_in.principal, signed_in.member.org_id)
    actor = signed_in.principal.actor
    created = create_member(session, org=org, email=email, role=role, actor=actor, now=now, enroll_ttl=ttl)
    return created.member, created.enroll_token


def _email_taken(session: Session, signed_in: SignedIn, email: str) -> bool:
    try:
        find_member(session, signed_in.principal, email, org_id=signed_in.member.org_id)
    except MemberNotFound:
        return False
    return True


async def _form(visit: Visit) -> dict[str, str]:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    return {key: value for key, value in form.items() if isinstance(value, str)}


async def invite(visit: Visit) -> Response:
    """Invite a member: their enrolment link is shown on the answer, once."""
    form = await _form(visit)
    services = visit.services
    signed_in = visit.member
    if not may_manage_members(signed_in.member):
        return refused(visit, NOT_MANAGER)
    try:
        email = clean_email(form.get("email", ""))
        role = parse_role(form.get("role", ""))
    except PaywardenError as error:
        return await _render(visit, status=status_of(error), error=error.describe(), form=form)
    if role is Role.OWNER and signed_in.member.role is not Role.OWNER:
        return refused(visit, NOT_OWNER)
    if await services.db.reading(_email_taken, signed_in, email):
        return await _render(visit, status=409, error=EMAIL_TAKEN, form=form)
    if await _needs_sudo(visit):
        return visit.redirect(sudo_url(PATH))
    try:
        member, token = await services.db.writing(
            _invite,
            signed_in,
            email=email,
            role=role,
            ttl=timedelta(seconds=services.settings.enroll_ttl),
            now=services.clock.now(),
        )
    except NameTaken:  # invited by someone else meanwhile
        return await _render(visit, status=409, error=EMAIL_TAKEN, form=form)
    link = f"{services.settings.pages_url}/enroll/{token}"
    seconds = services.settings.enroll_ttl
    lasts = f"{seconds // 3600} hours" if seconds >= 7200 else f"{seconds // 60} minutes"
    return await _render(visit, invited=(member.email, link, lasts))


def _member_id(visit: Visit) -> str:
    member_id = str(visit.request.path_params["member_id"])
    if not member_id.startswith("mem") or len(member_id) > 40:
        raise MemberNotFound()
    return member_id


def _target(session: Session, signed_in: SignedIn, member_id: str) -> Member:
    return find_member(session, signed_in.principal, member_id, org_id=signed_in.member.org_id)


class Outcome(StrEnum):
    """What became of a change, decided in the unit of work that makes it (under the
    organisation's lock), so a member's role cannot change between the check and the write."""

    DONE = "done"
    NOT_OWNER = "not_owner"
    NEEDS_SUDO = "needs_sudo"


def _change_role(
    session: Session, signed_in: SignedIn, member_id: str, *, role: Role, sudo: bool, now: datetime
) -> Outcome:
    lock_org(session, signed_in.member.org_id)
    member = _target(session, signed_in, member_id)
    if Role.OWNER in (role, member.role) and signed_in.member.role is not Role.OWNER:
        return Outcome.NOT_OWNER
    if widens(member.role, role) and not sudo:
        return Outcome.NEEDS_SUDO
    set_member_role(session, signed_in.principal, member=member, role=role, now=now)
    return Outcome.DONE


async def change_role(visit: Visit) -> Response:
    """Give a member another role; raising one (towards owner) waits for sudo, lowering never."""
    form = await _form(visit)
    services = visit.services
    signed_in = visit.member
    if not may_manage_members(signed_in.member):
        return refused(visit, NOT_MANAGER)
    member_id = _member_id(visit)
    try:
        role = parse_role(form.get("role", ""))
        outcome = await services.db.writing(
            _change_role,
            signed_in,
            member_id,
            role=role,
            sudo=not await _needs_sudo(visit),
            now=services.clock.now(),
        )
    except PaywardenError as error:
        return await _render(visit, status=status_of(error), error=error.describe())
    if outcome is Outcome.NOT_OWNER:
        return refused(visit, NOT_OWNER)
    if outcome is Outcome.NEEDS_SUDO:
        return visit.redirect(sudo_url(PATH))
    return visit.redirect(f"{PATH}?done=role")


def _switch(
    session: Session, signed_in: SignedIn, member_id: str, *, disabled: bool, now: datetime
) -> Outcome:
    lock_org(session, signed_in.member.org_id)
    member = _target(session, signed_in, member_id)
    if member.role is Role.OWNER and signed_in.member.role is not Role.OWNER:
        return Outcome.NOT_OWNER
    set_member_disabled(session, member=member, disabled=disabled, actor=signed_in.principal.actor, now=now)
    return Outcome.DONE


async def _set_disabled(visit: Visit, *, disabled: bool) -> Response:
    """Disabling never waits for sudo; enabling gives back only what the member had."""
    await _form(visit)
    services = visit.services
    signed_in = visit.member
    if not may_manage_members(signed_in.member):
        return refused(visit, NOT_MANAGER)
    member_id = _member_id(visit)
    if disabled and member_id == signed_in.member.id:
        return refused(visit, NOT_YOURSELF)
    outcome = await services.db.writing(
        _switch, signed_in, member_id, disabled=disabled, now=services.clock.now()
    )
    if outcome is Outcome.NOT_OWNER:
        return refused(visit, NOT_OWNER)
    return visit.redirect(f"{PATH}?done={'disabled' if disabled else 'enabled'}")


async def disable(visit: Visit) -> Response:
    return await _set_disabled(visit, disabled=True)


async def enable(visit: Visit) -> Response:
    return await _set_disabled(visit, disabled=False)
