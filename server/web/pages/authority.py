"""Who may change what on the organisation's pages, and the page that says no.

Every member sees the organisation's pages; owners and admins manage members, and owners change
the organisation's settings. Anyone else sees each form disabled, and a form posted anyway is
answered 403 with a page that says why."""

from __future__ import annotations

from starlette.responses import Response

from server.models import Member
from server.vocabulary import Role
from server.web.pages.common import Visit

MANAGERS = frozenset({Role.OWNER, Role.ADMIN})
# How far each role reaches: raising a member is giving them a role further up this list.
RANK = {Role.VIEWER: 0, Role.APPROVER: 1, Role.ADMIN: 2, Role.OWNER: 3}


def may_manage_members(member: Member) -> bool:
    return member.role in MANAGERS


def may_change_settings(member: Member) -> bool:
    return member.role is Role.OWNER


def widens(before: Role, after: Role) -> bool:
    return RANK[after] > RANK[before]


def refused(visit: Visit, sentence: str) -> Response:
    """The 403 page a form posted without the authority it needs gets."""
    return visit.message("You cannot change this", sentence, status=403)
