"""/account/changes/{id}: confirm a change an admin token asked for that widens authority.

The page says the change in words (what it changes, from what to what, and which token asked),
and an owner or admin of the change's organisation confirms it with a user-verified passkey whose
challenge commits to the change's hash (server/tenancy/changes.py). Anyone else, and anyone of
another organisation, sees that there is nothing here to confirm. A token made by a confirmed
change is shown on this page once, to the member who confirmed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlmodel import Session
from starlette.responses import Response

from auth import step_up
from auth.scopes import scope_words
from auth.sessions import SignedIn
from server.kit.crypto import MasterKey
from server.kit.money import format_usd
from server.models import PendingChange
from server.policy.rulebook import RuleNotFound, rule_in_force
from server.tenancy import changes
from server.tenancy.service import agent_with_policy, find_member
from server.vocabulary import PendingChangeKind
from server.web.pages.ceremonies import options_answer, read_answer
from server.web.pages.common import Visit

PATH = changes.PATH


@dataclass(frozen=True)
class ChangeView:
    """A pending change as the page says it; every string is rendered as escaped text."""

    id: str
    kind: PendingChangeKind
    heading: str
    lines: list[str]
    asked_by: str
    created_at: datetime
    expires_at: datetime
    status: str  # pending, confirmed or expired
    may_confirm: bool
    minutes_left: int


def _hosts(hosts: list[str]) -> str:
    return ", ".join(hosts) if hosts else "none"


def _lifetime(seconds: int) -> str:
    hours = seconds / 3600
    return f"{hours / 24:g} days" if hours >= 48 else f"{hours:g} hours"


def _words(
    session: Session, signed_in: SignedIn, row: PendingChange, *, now: datetime
) -> tuple[str, list[str]]:
    principal = signed_in.principal
    change = changes.change_of(row)
    if row.kind == PendingChangeKind.POLICY:
        agent, policy = agent_with_policy(session, principal, row.subject_id)
        now_doc = policy.to_document()
        lines = []
        if "maxUsdPerTx" in change:
            lines.append(f"Most per payment: {change['maxUsdPerTx']} USD (now {now_doc['maxUsdPerTx']} USD)")
        if "dailyCapUsd" in change:
            lines.append(f"Most per day: {change['dailyCapUsd']} USD (now {now_doc['dailyCapUsd']} USD)")
        if "allowHosts" in change:
            lines.append(
                f"Allowed hosts: {_hosts(change['allowHosts'])} (now {_hosts(now_doc['allowHosts'])})"
            )
        if "denyHosts" in change:
            lines.append(f"Denied hosts: {_hosts(change['denyHosts'])} (now {_hosts(now_doc['denyHosts'])})")
        return f"Change what agent {agent.name} may pay", lines
    if row.kind == PendingChangeKind.NEW_CREDENTIAL:
        agent, _ = agent_with_policy(session, principal, row.subject_id)
        lines = [f"It may: {word}" for word in scope_words(" ".join(change["scopes"]))]
        lines.append(f"It works for {_lifetime(int(change['ttlSeconds']))} from when it is confirmed")
        if change.get("label"):
            lines.append(f"Label: {change['label']}")
        return f"Issue a new token for agent {agent.name}", lines
    if row.kind == PendingChangeKind.INVITE:
        hours = int(change["enrollTtlSeconds"]) // 3600
        return (
            f"Invite {change['email']} as {change['role']}",
            [
                f"Role: {change['role']}",
                f"They get a one-time link to create their passkey, usable for {_lifetime(hours * 3600)}",
            ],
        )
    if row.kind in (PendingChangeKind.RULE_CHANGE, PendingChangeKind.RULE_REMOVAL):
        return _rule_words(session, signed_in, row, change, now=now)
    member = find_member(session, principal, row.subject_id, org_id=row.org_id)
    return (
        f"Give {member.email} the role {change['role']}",
        [f"Role now: {member.role}", f"Role after: {change['role']}"],
    )


def _rule_words(
    session: Session, signed_in: SignedIn, row: PendingChange, change: dict[str, Any], *, now: datetime
) -> tuple[str, list[str]]:
    """A rule's raised limit or its removal, said with the rule as it stands now."""
    try:
        rule, scope_id = rule_in_force(session, signed_in.principal, row.subject_id, now=now)
    except RuleNotFound:
        return f"Rule {row.subject_id}", ["The rule is no longer in force: confirming changes nothing."]
    terms = [f"Kind: {rule.kind}", f"For: {rule.scope} {scope_id}"]
    if rule.host is not None:
        terms.append(f"Host: {rule.host}")
    if rule.path_prefix is not None:
        terms.append(f"Path prefix: {rule.path_prefix}")
    now_limit = None if rule.limit_atomic is None else format_usd(rule.limit_atomic, atomic=True)
    if row.kind == PendingChangeKind.RULE_CHANGE:
        terms.append(f"Limit: {change['limitUsd']} USD per {rule.window} (now {now_limit} USD)")
        return f"Raise the limit of rule {rule.id}", terms
    if now_limit is not None:
        terms.append(f"Limit now: {now_limit} USD per {rule.window}")
    return f"Remove rule {rule.id}: what it stopped or held is no longer stopped by it", terms


def _view(
    session: Session, signed_in: SignedIn, change_id: str, *, now: datetime, master: MasterKey
) -> tuple[ChangeView, str | None]:
    """The change as the page says it, and (once) the token its confirmation made."""
    row = changes.find_change(session, signed_in.principal, change_id)
    heading, lines = _words(session, signed_in, row, now=now)
    status = (
        "confirmed" if row.confirmed_at is not None else "expired" if row.expires_at <= now else "pending"
    )
    view = ChangeView(
        id=row.id,
        kind=row.kind,
        heading=heading,
        lines=lines,
        asked_by=row.asked_by.removeprefix("token:"),
        created_at=row.created_at,
        expires_at=row.expires_at,
        status=status,
        may_confirm=changes.may_confirm(signed_in.member, row),
        minutes_left=max(0, int((row.expires_at - now).total_seconds() + 59) // 60),
    )
    return view, changes.take_result(session, signed_in, change_id, master=master)


def _change_id(visit: Visit) -> str:
    return str(visit.request.path_params["change_id"])


async def show(visit: Visit) -> Response:
    services = visit.services
    try:
        view, secret = await services.db.writing(
            _view,
            visit.member,
            _change_id(visit),
            now=services.clock.now(),
            master=services.settings.master,
        )
    except changes.ChangeNotFound:
        return visit.message(
            "No change here",
            "There is no change at this address waiting in your organisation.",
            status=404,
            link=("/admin", "Go to the home page"),
        )
    return visit.render(
        "change.html",
        {
            "title": view.heading if view.status == "pending" else "Change confirmed",
            "change": view,
            "token": secret if view.kind != PendingChangeKind.INVITE else None,
            "enroll_url": secret if view.kind == PendingChangeKind.INVITE else None,
        },
    )


async def options(visit: Visit) -> Response:
    await read_answer(visit)
    services = visit.services
    ceremony = await services.db.writing(
        changes.begin_confirmation,
        rp=services.relying_party,
        signed_in=visit.member,
        change_id=_change_id(visit),
        now=services.clock.now(),
    )
    return visit.json(options_answer(visit, ceremony))


async def verify_change(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    now = services.clock.now()
    change_id = _change_id(visit)
    # Two units of work: the challenge is spent even if the answer to it is then refused.
    claimed = await services.db.writing(step_up.claim, body.get("challengeId"), signed_in=signed_in, now=now)
    await services.db.writing(
        changes.confirm_change,
        rp=services.relying_party,
        signed_in=signed_in,
        change_id=change_id,
        claimed=claimed,
        credential=body.get("credential"),
        master=services.settings.master,
        now=now,
    )
    return visit.json({"redirect": f"{PATH}/{change_id}?done=confirmed"})
