"""/admin/api-tokens: tokens for the organisation's admin API (`/api/v1`), for its automation.

Owners issue them (a read token, `admin:read`, or a read-and-write one, `admin:write`) and revoke
them; everyone else sees the list and the forms disabled. Issuing widens what can act for the
organisation, so it needs sudo mode; the secret is in the answer to the issuing request only (only
its hash is stored), and the form's one-time nonce names the token, so the same form posted again
issues nothing. Revoking never waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session
from starlette.datastructures import FormData
from starlette.responses import Response

from auth.scopes import Scope
from auth.sessions import SignedIn
from auth.tokens import (
    IssuedToken,
    LiveToken,
    TokenAlreadyIssued,
    TokenNotFound,
    issue_access_token,
    live_tokens,
    revoke_token,
)
from server.web.pages.authority import may_change_settings, refused
from server.web.pages.common import Visit
from server.web.pages.sudo import has_fresh_sudo, sudo_url
from server.web.pages.token_forms import SHOWN_ALREADY, STALE_FORM, is_nonce, new_nonce, token_id_for

PATH = "/admin/api-tokens"
ACCESS = {"read": Scope.ADMIN_READ, "write": Scope.ADMIN_WRITE}
TTL_DAYS = (1, 7, 30, 90, 365)
NOT_OWNER = "Only an owner of your organisation can issue or revoke admin API tokens."
DONE = {"revoked": "The token was revoked: its next request to the admin API is refused."}


@dataclass(frozen=True)
class PageState:
    issued: IssuedToken | None = None
    errors: dict[str, str] = field(default_factory=dict)
    problem: str | None = None


def _admin_tokens(session: Session, signed_in: SignedIn, now: datetime) -> list[LiveToken]:
    """The organisation's tokens for the admin API that still work (agent tokens are on each
    agent's page)."""
    found = live_tokens(session, signed_in.principal, org_id=signed_in.member.org_id, now=now)
    return [live for live in found if live.row.agent_id is None]


async def _render(visit: Visit, state: PageState | None = None, *, status: int = 200) -> Response:
    services = visit.services
    state = state or PageState()
    tokens = await services.db.reading(_admin_tokens, visit.member, services.clock.now())
    context: dict[str, Any] = {
        "title": "Admin API tokens",
        "nav": "settings",
        "tokens": tokens,
        "may_change": may_change_settings(visit.member.member),
        "ttl_days": TTL_DAYS,
        "api_url": f"{services.settings.public_url}/api/v1",
        "issued": state.issued,
        "nonce": new_nonce(),
        "errors": state.errors,
        "problem": state.problem,
        "notice": DONE.get(visit.request.query_params.get("done", "")),
    }
    answer = visit.render("api_tokens.html", context, status=status)
    if state.issued is not None:
        answer.headers["cache-control"] = "no-store"  # the secret is in this answer only
    return answer


async def show(visit: Visit) -> Response:
    return await _render(visit)


async def _owner_form(visit: Visit) -> FormData | Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    if not may_change_settings(visit.member.member):
        return refused(visit, NOT_OWNER)
    return form


def _choices(form: FormData) -> tuple[dict[str, str], str | None]:
    """What was wrong with the form, by field, and the label given (None when left empty)."""
    errors: dict[str, str] = {}
    if str(form.get("access", "")) not in ACCESS:
        errors["access"] = "Choose read, or read and write."
    days = str(form.get("ttl_days", ""))
    if not days.isdigit() or int(days) not in TTL_DAYS:
        errors["ttl_days"] = "Choose one of the lifetimes listed."
    label = str(form.get("label", "")).strip() or None
    if label is not None and len(label) > 120:
        errors["label"] = "A label has at most 120 characters."
    return errors, label


def _issue(
    session: Session,
    signed_in: SignedIn,
    *,
    token_id: str,
    scope: Scope,
    ttl_days: int,
    label: str | None,
    audience: str,
    now: datetime,
) -> IssuedToken:
    return issue_access_token(
        session,
        org_id=signed_in.member.org_id,
        agent_id=None,
        scopes=frozenset({scope}),
        audience=audience,
        ttl_seconds=ttl_days * 86_400,
        created_by=signed_in.principal.actor,
        now=now,
        label=label,
        token_id=token_id,
    )


async def issue(visit: Visit) -> Response:
    form = await _owner_form(visit)
    if isinstance(form, Response):
        return form
    errors, label = _choices(form)
    if errors:
        problem = "No token was issued: correct the choices marked below."
        return await _render(visit, PageState(errors=errors, problem=problem), status=400)
    nonce = str(form.get("nonce", ""))
    if not is_nonce(nonce):
        return await _render(visit, PageState(problem=STALE_FORM), status=400)
    if not await has_fresh_sudo(visit):
        return visit.redirect(sudo_url(PATH))
    services = visit.services
    signed_in = visit.member
    try:
        issued = await services.db.writing(
            _issue,
            signed_in,
            token_id=token_id_for(
                services.settings.master, member_id=signed_in.member.id, subject="admin-api", nonce=nonce
            ),
            scope=ACCESS[str(form["access"])],
            ttl_days=int(str(form["ttl_days"])),
            label=label,
            audience=services.settings.admin_api_audience,
            now=services.clock.now(),
        )
    except TokenAlreadyIssued:
        return await _render(visit, PageState(problem=SHOWN_ALREADY), status=409)
    return await _render(visit, PageState(issued=issued))


def _revoke(session: Session, signed_in: SignedIn, token_id: str, now: datetime) -> None:
    if all(live.row.id != token_id for live in _admin_tokens(session, signed_in, now)):
        raise TokenNotFound()  # an agent's token, another organisation's, or no longer working
    revoke_token(session, signed_in.principal, token_id=token_id, now=now)


async def revoke(visit: Visit) -> Response:
    form = await _owner_form(visit)
    if isinstance(form, Response):
        return form
    services = visit.services
    token_id = str(visit.request.path_params["token_id"])
    await services.db.writing(_revoke, visit.member, token_id, services.clock.now())
    return visit.redirect(f"{PATH}?done=revoked")
