"""The admin API's organisation settings: its name, how long held payments wait for a decision, and
the Slack webhook approvals are announced to. The webhook is checked as the settings page checks it
(https on Slack's webhook host), sealed with the master key, and only ever shown masked."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.principal import Principal
from server.approvals.notifications import check_webhook_url, mask_webhook, seal_webhook
from server.kit.crypto import MasterKey
from server.models import Organization
from server.policy.service import SudoRequired
from server.tenancy.service import (
    find_org,
    rename_org,
    set_approval_ttl,
    set_circuit_thresholds,
    set_slack_webhook,
)
from server.web.api.parts import body_of, now_of, reading, writing
from server.web.api.schemas import OrganizationChange, OrganizationDocument
from server.web.http import services_of

KEEP = object()  # the webhook is left as it is


def _own(session: Session, principal: Principal) -> Organization:
    assert principal.org_id is not None  # an admin token is bound to one organisation
    return find_org(session, principal, principal.org_id)


def _document(session: Session, principal: Principal) -> OrganizationDocument:
    return OrganizationDocument.of(_own(session, principal))


async def show_organization(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _document, principal)


def _change(
    session: Session,
    principal: Principal,
    asked: OrganizationChange,
    *,
    webhook: str | object | None,
    master: MasterKey,
    now: datetime,
) -> OrganizationDocument:
    """Every setting asked for, in one unit of work: each is checked before anything is kept."""
    org = _own(session, principal)
    actor = principal.actor
    # More failures before a seller is blocked, or a shorter window to count them in, lets more
    # paid-but-undelivered calls through: that waits for a passkey, on the dashboard.
    loosened = []
    if asked.circuitFailures is not None and asked.circuitFailures > org.circuit_failures:
        loosened.append("circuitFailures")
    if asked.circuitWindowHours is not None and asked.circuitWindowHours < org.circuit_window_hours:
        loosened.append("circuitWindowHours")
    if loosened:
        raise SudoRequired(widens=tuple(loosened))
    if asked.name is not None:
        rename_org(session, org=org, name=asked.name, actor=actor, now=now)
    if asked.approvalTtlSeconds is not None:
        set_approval_ttl(session, org=org, seconds=asked.approvalTtlSeconds, actor=actor, now=now)
    if asked.circuitFailures is not None or asked.circuitWindowHours is not None:
        set_circuit_thresholds(
            session,
            org=org,
            failures=asked.circuitFailures,
            hours=asked.circuitWindowHours,
            actor=actor,
            now=now,
        )
    if webhook is not KEEP:
        url = webhook if isinstance(webhook, str) else None
        sealed = None if url is None else seal_webhook(master, org_id=org.id, url=url)
        masked = None if url is None else mask_webhook(url)
        set_slack_webhook(
            session, org=org, sealed=sealed, masked=masked, key_id=master.key_id, actor=actor, now=now
        )
    return OrganizationDocument.of(org)


async def change_organization(request: Request, principal: Principal) -> BaseModel:
    """Rename, set the approval TTL, save or (with null) remove the Slack webhook."""
    asked = await body_of(request, OrganizationChange)
    settings = services_of(request).settings
    webhook: str | object | None = KEEP
    if "slackWebhookUrl" in asked.model_fields_set:
        typed = asked.slackWebhookUrl
        webhook = (
            None if typed is None else check_webhook_url(typed, allow_loopback=settings.allow_private_hosts)
        )
    return await writing(
        request, _change, principal, asked, webhook=webhook, master=settings.master, now=now_of(request)
    )
