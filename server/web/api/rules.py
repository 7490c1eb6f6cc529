"""The admin API's spending rules: list the organisation's rules in force, add one, change a limit
rule's limit, remove one. Rules only restrict, so adding one and lowering a limit are made at once;
raising a limit and removing a rule widen what agents may pay, so they answer 202 and wait for a
member's passkey (server/tenancy/changes.py applies them once confirmed)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.principal import Principal
from server.kit.money import AmountError, format_usd, parse_usd, usd_to_atomic
from server.models import PendingChange
from server.policy.rulebook import (
    RuleRejected,
    add_rule,
    agent_scopes,
    narrow_rule,
    rule_in_force,
    rules_of_org,
)
from server.policy.rules import RuleReason
from server.policy.service import SudoRequired
from server.tenancy import changes
from server.tenancy.service import get_agent, rule_target
from server.vocabulary import PendingChangeKind
from server.web.api.confirmations import confirmation_required
from server.web.api.parts import body_of, now_of, path, reading, writing
from server.web.api.schemas import RuleChange, RuleCreate, RuleDocument, RuleList
from server.web.http import NO_STORE


def limit_of(text: str | None) -> Decimal | None:
    """A rule's limit as USD, or rule_rejected (invalid_limit) that names `limitUsd`."""
    if text is None:
        return None
    try:
        amount = parse_usd(text)
        usd_to_atomic(amount)
    except AmountError as exc:
        raise RuleRejected(RuleReason.INVALID_LIMIT, ["limitUsd"]) from exc
    return amount


def _rules_in_force(
    session: Session, principal: Principal, *, agent_id: str | None, now: datetime
) -> RuleList:
    assert principal.org_id is not None  # an admin token is bound to one organisation
    found = rules_of_org(session, principal.org_id, now=now)
    if agent_id is not None:
        applying = set(agent_scopes(get_agent(session, principal, agent_id)))
        found = [(rule, scope_id) for rule, scope_id in found if (rule.scope, scope_id) in applying]
    return RuleList(rules=[RuleDocument.of(rule, scope_id) for rule, scope_id in found])


async def list_rules(request: Request, principal: Principal) -> BaseModel:
    agent_id = request.query_params.get("agent")
    return await reading(request, _rules_in_force, principal, agent_id=agent_id, now=now_of(request))


def _add_rule(session: Session, principal: Principal, asked: RuleCreate, *, now: datetime) -> RuleDocument:
    target = rule_target(session, principal, asked.scope, asked.scopeId)  # within the organisation
    rule = add_rule(
        session,
        target=target,
        kind=str(asked.kind),
        host=asked.host,
        path_prefix=asked.pathPrefix,
        limit_usd=limit_of(asked.limitUsd),
        window=None if asked.window is None else str(asked.window),
        actor=principal.actor,
        now=now,
    )
    return RuleDocument.of(rule, target.scope_id)


async def create_rule(request: Request, principal: Principal) -> Response:
    """A new rule only ever restricts: it is made at once (201)."""
    asked = await body_of(request, RuleCreate)
    document = await writing(request, _add_rule, principal, asked, now=now_of(request))
    return JSONResponse(document.model_dump(mode="json"), status_code=201, headers=NO_STORE)


def _lower_rule(
    session: Session, principal: Principal, rule_id: str, limit: Decimal, *, now: datetime
) -> RuleDocument:
    rule = narrow_rule(session, principal, rule_id=rule_id, limit_usd=limit, now=now)
    _, scope_id = rule_in_force(session, principal, rule.id, now=now)
    return RuleDocument.of(rule, scope_id)


def ask_for_rule(
    session: Session,
    principal: Principal,
    rule_id: str,
    *,
    kind: PendingChangeKind,
    change: dict[str, str],
    now: datetime,
) -> PendingChange:
    rule, _ = rule_in_force(session, principal, rule_id, now=now)  # another organisation's is not found
    return changes.ask(session, principal, kind=kind, subject_id=rule.id, change=change, now=now)


async def change_rule_limit(request: Request, principal: Principal) -> BaseModel | Response:
    """A lower (or the same) limit is made at once; a higher one waits for a member's passkey."""
    asked = await body_of(request, RuleChange)
    rule_id = path(request, "rule_id")
    limit = limit_of(asked.limitUsd)
    assert limit is not None
    try:
        return await writing(request, _lower_rule, principal, rule_id, limit, now=now_of(request))
    except SudoRequired:
        row = await writing(
            request,
            ask_for_rule,
            principal,
            rule_id,
            kind=PendingChangeKind.RULE_CHANGE,
            change={"limitUsd": format_usd(limit)},
            now=now_of(request),
        )
        return confirmation_required(request, row)


async def ask_to_remove_rule(request: Request, principal: Principal) -> Response:
    """Removing a rule lets through what it stopped or held: it waits for a member's passkey."""
    row = await writing(
        request,
        ask_for_rule,
        principal,
        path(request, "rule_id"),
        kind=PendingChangeKind.RULE_REMOVAL,
        change={},
        now=now_of(request),
    )
    return confirmation_required(request, row)
