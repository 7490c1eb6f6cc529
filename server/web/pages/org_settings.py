"""/admin/settings: the organisation's settings: how long pending approvals wait, and the Slack
webhook its approvals and account changes are announced to (https on Slack's webhook host; once
saved, shown masked, never whole). Owners change them; everyone else sees the forms disabled."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlmodel import Session
from starlette.responses import Response

from auth.sessions import SignedIn
from server.approvals.notifications import check_webhook_url, mask_webhook, seal_webhook
from server.kit.crypto import MasterKey
from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.models import Organization
from server.tenancy.service import find_org, set_approval_ttl, set_slack_webhook
from server.web.pages.authority import may_change_settings, refused
from server.web.pages.common import Visit, status_of

PATH = "/admin/settings"
TTL_CHOICES_MINUTES = (5, 10, 15, 30, 60, 120, 240, 480, 1440)
DONE = {
    "ttl": "Pending approvals now wait for the time you chose.",
    "slack": "The Slack webhook was saved: approvals waiting for a decision are announced there.",
    "slack-removed": "The Slack webhook was removed: nothing of this organisation is announced in Slack.",
}
NOT_OWNER = "Only an owner of your organisation can change its settings."


def _own_org(session: Session, signed_in: SignedIn) -> Organization:
    return find_org(session, signed_in.principal, signed_in.member.org_id)


async def _render(
    visit: Visit, *, status: int = 200, error: str | None = None, typed: str | None = None
) -> Response:
    signed_in = visit.member
    org = await visit.services.db.reading(_own_org, signed_in)
    context: dict[str, Any] = {
        "title": "Settings",
        "nav": "settings",
        "org_name": org.name,
        "may_change": may_change_settings(signed_in.member),
        "ttl_minutes": org.approval_ttl_seconds // 60,
        "ttl_choices": TTL_CHOICES_MINUTES,
        "webhook_masked": org.slack_webhook_masked,
        "server_webhook": visit.services.settings.slack_webhook_url is not None,
        "typed": typed,
        "error": error,
        "notice": DONE.get(visit.request.query_params.get("done", "")),
    }
    return visit.render("settings.html", context, status=status)


async def show(visit: Visit) -> Response:
    return await _render(visit)


async def _owner_form(visit: Visit) -> dict[str, str] | Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    if not may_change_settings(visit.member.member):
        return refused(visit, NOT_OWNER)
    return {key: value for key, value in form.items() if isinstance(value, str)}


def _set_ttl(session: Session, signed_in: SignedIn, *, seconds: int, now: datetime) -> None:
    org = _own_org(session, signed_in)
    set_approval_ttl(session, org=org, seconds=seconds, actor=signed_in.principal.actor, now=now)


async def set_ttl(visit: Visit) -> Response:
    """How long the organisation's pending approvals wait (5 minutes to 24 hours)."""
    form = await _owner_form(visit)
    if isinstance(form, Response):
        return form
    services = visit.services
    minutes = form.get("minutes", "")
    try:
        if not minutes.isdigit() or len(minutes) > 5:
            raise InvalidInput(InputReason.INVALID_APPROVAL_TTL)
        await services.db.writing(_set_ttl, visit.member, seconds=int(minutes) * 60, now=services.clock.now())
    except PaywardenError as error:
        return await _render(visit, status=status_of(error), error=error.describe())
    return visit.redirect(f"{PATH}?done=ttl")


def _set_webhook(
    session: Session, signed_in: SignedIn, *, url: str | None, master: MasterKey, now: datetime
) -> None:
    org = _own_org(session, signed_in)
    sealed = seal_webhook(master, org_id=org.id, url=url) if url is not None else None
    masked = mask_webhook(url) if url is not None else None
    set_slack_webhook(
        session,
        org=org,
        sealed=sealed,
        key_id=master.key_id,
        masked=masked,
        actor=signed_in.principal.actor,
        now=now,
    )


async def set_slack(visit: Visit) -> Response:
    """Save the organisation's Slack webhook, or remove it (`remove=1`)."""
    form = await _owner_form(visit)
    if isinstance(form, Response):
        return form
    services = visit.services
    removing = form.get("remove") == "1"
    typed = form.get("url", "")
    try:
        url = (
            None
            if removing
            else check_webhook_url(typed, allow_loopback=services.settings.allow_private_hosts)
        )
    except PaywardenError as error:
        return await _render(visit, status=status_of(error), error=error.describe(), typed=typed[:200])
    await services.db.writing(
        _set_webhook, visit.member, url=url, master=services.settings.master, now=services.clock.now()
    )
    return visit.redirect(f"{PATH}?done={'slack-removed' if removing else 'slack'}")
