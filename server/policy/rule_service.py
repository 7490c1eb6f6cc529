"""Store and read spending rules. A change never edits a row: it writes the rule's next version
(removal is a version with `active` false), and every change is an audit event.

Admins add rules of any scope and kind from the CLI; agents add only restrict-only chat rules
through propose_rule (see chat_rules); new agents get a default weekly rule.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import and_, func, or_
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.kit.money import format_usd, usd_to_atomic
from server.models import Agent, Member, Organization, RuleVersion, Team
from server.policy.chat_rules import MAX_ACTIVE_CHAT_RULES, MAX_PROPOSALS_PER_HOUR, Proposal
from server.policy.rules import WEEKLY_DEFAULT_FACTOR, Rule, RuleError, RuleScope, clean_terms

# The functions that write rules; a static test checks which MCP tools can reach them.
WRITERS = ("add_rule", "change_rule", "remove_rule", "create_default_rules", "propose_chat_rule")


class RuleNotFound(PaywardenError):
    code = "rule_not_found"
    message = "No rule with that id."


class ScopeNotFound(PaywardenError):
    code = "scope_not_found"
    message = "No agent, team, member or organisation with that id for this scope."


class RuleRejected(PaywardenError):
    code = "rule_rejected"
    message = "The rule was not added. See reason and fields."


class RuleLimitReached(PaywardenError):
    code = "rule_limit_reached"
    message = "No more rules can be proposed from the chat for now. See max."


def rule_from_row(row: RuleVersion) -> Rule:
    return Rule(
        id=row.rule_id,
        version=row.version,
        scope=row.scope,
        kind=row.kind,
        host=row.host,
        path_prefix=row.path_prefix,
        limit_atomic=row.limit_atomic,
        window=row.window,
        source=row.source,
        expires_at=row.expires_at,
    )


def rule_document(rule: Rule) -> dict[str, object]:
    return {
        "ruleId": rule.id,
        "version": rule.version,
        "scope": rule.scope,
        "kind": rule.kind,
        "host": rule.host,
        "pathPrefix": rule.path_prefix,
        "limitUsd": None if rule.limit_atomic is None else format_usd(rule.limit_atomic, atomic=True),
        "window": rule.window,
        "source": rule.source,
        "expiresAt": rule.expires_at.isoformat() if rule.expires_at else None,
    }


def _in_force(org_id: str, now: datetime) -> SelectOfScalar[RuleVersion]:
    """Each rule's newest version, if it is active and not expired."""
    latest = (
        select(RuleVersion.rule_id, func.max(RuleVersion.version).label("latest"))
        .where(RuleVersion.org_id == org_id)
        .group_by(col(RuleVersion.rule_id))
        .subquery()
    )
    return (
        select(RuleVersion)
        .join(
            latest,
            and_(col(RuleVersion.rule_id) == latest.c.rule_id, col(RuleVersion.version) == latest.c.latest),
        )
        .where(RuleVersion.org_id == org_id, col(RuleVersion.active).is_(True))
        .where(or_(col(RuleVersion.expires_at).is_(None), col(RuleVersion.expires_at) > now))
        .order_by(col(RuleVersion.created_at), col(RuleVersion.rule_id))
    )


def current_rules(
    session: Session, *, org_id: str, scopes: Sequence[tuple[str, str]], now: datetime
) -> list[Rule]:
    """The rules in force (newest version active, not expired) for any of the (scope, id) pairs."""
    if not scopes:
        return []
    query = _in_force(org_id, now).where(
        or_(*(and_(col(RuleVersion.scope) == s, col(RuleVersion.scope_id) == i) for s, i in scopes))
    )
    return [rule_from_row(row) for row in session.exec(query)]


def agent_scopes(agent: Agent) -> list[tuple[str, str]]:
    scopes = [("agent", agent.id), ("org", agent.org_id)]
    if agent.team_id:
        scopes.append(("team", agent.team_id))
    if agent.member_id:
        scopes.append(("member", agent.member_id))
    return scopes


def rules_for_agent(session: Session, agent: Agent, *, now: datetime) -> list[Rule]:
    """Every rule that applies to the agent: its own, its team's, its member's, its organisation's."""
    return current_rules(session, org_id=agent.org_id, scopes=agent_scopes(agent), now=now)


def rules_of_org(session: Session, org_id: str, *, now: datetime) -> list[tuple[Rule, str]]:
    """Every rule in force in the organisation, with the id of what it is scoped to."""
    return [(rule_from_row(row), row.scope_id) for row in session.exec(_in_force(org_id, now))]


def latest_row(session: Session, rule_id: str) -> RuleVersion:
    row = session.exec(
        select(RuleVersion).where(RuleVersion.rule_id == rule_id).order_by(col(RuleVersion.version).desc())
    ).first()
    if row is None:
        raise RuleNotFound()
    return row


def resolve_scope(session: Session, scope: str, ref: str) -> tuple[str, str]:
    """(org id, scope id) for a scope target given by id (or, for an organisation, by name)."""
    if scope == "org":
        org = (
            session.get(Organization, ref)
            or session.exec(select(Organization).where(Organization.name == ref)).first()
        )
        if org is None:
            raise ScopeNotFound()
        return org.id, org.id
    target: Agent | Team | Member | None
    if scope == "agent":
        target = session.get(Agent, ref)
    elif scope == "team":
        target = session.get(Team, ref)
    elif scope == "member":
        target = session.get(Member, ref)
    else:
        raise RuleRejected(reason="invalid_scope", fields=["scope"])
    if target is None:
        raise ScopeNotFound()
    return target.org_id, target.id


def _event(source: str, change: str) -> str:
    return "policy.chat_rule_added" if source == "chat" and change == "added" else f"policy.rule_{change}"


def _write(
    session: Session, *, org_id: str, scope_id: str, rule: Rule, active: bool, actor: str, now: datetime
) -> RuleVersion:
    row = RuleVersion(
        rule_id=rule.id,
        version=rule.version,
        org_id=org_id,
        scope=rule.scope,
        scope_id=scope_id,
        kind=rule.kind,
        host=rule.host,
        path_prefix=rule.path_prefix,
        limit_atomic=rule.limit_atomic,
        window=rule.window,
        source=rule.source,
        active=active,
        expires_at=rule.expires_at,
        created_by=actor,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return row


def add_rule(
    session: Session,
    *,
    scope: RuleScope,
    scope_ref: str,
    kind: str,
    host: str | None,
    path_prefix: str | None,
    limit_usd: Decimal | None,
    window: str | None,
    actor: str,
    now: datetime,
    source: str = "admin",
) -> Rule:
    org_id, scope_id = resolve_scope(session, scope, scope_ref)
    lock_org(session, org_id)
    try:
        terms = clean_terms(
            kind=kind,
            host=host,
            path_prefix=path_prefix,
            limit_atomic=None if limit_usd is None else usd_to_atomic(limit_usd),
            window=window,
        )
    except RuleError as exc:
        raise RuleRejected(reason=exc.reason, fields=list(exc.fields)) from exc
    clean_kind, clean_host, clean_path, limit_atomic, clean_window = terms
    rule = Rule(
        id=new_id("rule"),
        version=1,
        scope=scope,
        kind=clean_kind,
        host=clean_host,
        path_prefix=clean_path,
        limit_atomic=limit_atomic,
        window=clean_window,
        source=source,  # type: ignore[arg-type]
    )
    _write(session, org_id=org_id, scope_id=scope_id, rule=rule, active=True, actor=actor, now=now)
    _audit(session, org_id=org_id, scope_id=scope_id, rule=rule, change="added", actor=actor, now=now)
    return rule


def _audit(
    session: Session, *, org_id: str, scope_id: str, rule: Rule, change: str, actor: str, now: datetime
) -> None:
    audit(
        session,
        org_id=org_id,
        type=_event(rule.source, change),
        actor=actor,
        agent_id=scope_id if rule.scope == "agent" else None,
        subject_id=rule.id,
        data={**rule_document(rule), "scopeId": scope_id},
        now=now,
    )


def change_rule(session: Session, *, rule_id: str, limit_usd: Decimal, actor: str, now: datetime) -> Rule:
    """A new version of a limit rule with another limit (the only term a human changes in place)."""
    row = latest_row(session, rule_id)
    lock_org(session, row.org_id)
    row = latest_row(session, rule_id)
    if not row.active:
        raise RuleNotFound()
    if row.kind != "limit":
        raise RuleRejected(reason="limit_on_non_limit_rule", fields=["limitUsd"])
    current = rule_from_row(row)
    updated = Rule(
        **{**vars(current), "version": current.version + 1, "limit_atomic": usd_to_atomic(limit_usd)}
    )
    _write(session, org_id=row.org_id, scope_id=row.scope_id, rule=updated, active=True, actor=actor, now=now)
    _audit(
        session,
        org_id=row.org_id,
        scope_id=row.scope_id,
        rule=updated,
        change="changed",
        actor=actor,
        now=now,
    )
    return updated


def remove_rule(session: Session, *, rule_id: str, actor: str, now: datetime) -> Rule:
    row = latest_row(session, rule_id)
    lock_org(session, row.org_id)
    row = latest_row(session, rule_id)
    if not row.active:
        raise RuleNotFound()
    current = rule_from_row(row)
    removed = Rule(**{**vars(current), "version": current.version + 1})
    _write(
        session, org_id=row.org_id, scope_id=row.scope_id, rule=removed, active=False, actor=actor, now=now
    )
    _audit(
        session,
        org_id=row.org_id,
        scope_id=row.scope_id,
        rule=removed,
        change="removed",
        actor=actor,
        now=now,
    )
    return removed


def create_default_rules(
    session: Session, *, agent: Agent, daily_cap_usd: Decimal, actor: str, now: datetime
) -> Rule:
    """A new agent's weekly limit: 5 x its daily cap, an ordinary rule from then on."""
    rule = Rule(
        id=new_id("rule"),
        version=1,
        scope="agent",
        kind="limit",
        limit_atomic=usd_to_atomic(daily_cap_usd) * WEEKLY_DEFAULT_FACTOR,
        window="week",
        source="default",
    )
    _write(session, org_id=agent.org_id, scope_id=agent.id, rule=rule, active=True, actor=actor, now=now)
    _audit(session, org_id=agent.org_id, scope_id=agent.id, rule=rule, change="added", actor=actor, now=now)
    return rule


def propose_chat_rule(
    session: Session, *, agent: Agent, proposal: Proposal, actor: str, now: datetime
) -> tuple[Rule, bool]:
    """Add a restrict-only rule on this agent, or return the identical one already in force.

    Counted under the organisation's lock, so concurrent proposals cannot pass the limits together.
    """
    lock_org(session, agent.org_id)
    candidate = Rule(
        id=f"chat-{secrets.token_hex(4)}",
        version=1,
        scope="agent",
        kind=proposal.kind,
        host=proposal.host,
        path_prefix=proposal.path_prefix,
        limit_atomic=proposal.limit_atomic,
        window=proposal.window,
        source="chat",
        expires_at=now + timedelta(hours=proposal.expires_in_hours),
    )
    in_force = current_rules(session, org_id=agent.org_id, scopes=[("agent", agent.id)], now=now)
    for rule in in_force:
        if rule.same_terms(candidate):
            return rule, False
    if sum(1 for rule in in_force if rule.source == "chat") >= MAX_ACTIVE_CHAT_RULES:
        raise RuleLimitReached(max=MAX_ACTIVE_CHAT_RULES)
    proposed = session.exec(
        select(func.count())
        .select_from(RuleVersion)
        .where(RuleVersion.scope == "agent", RuleVersion.scope_id == agent.id)
        .where(RuleVersion.source == "chat", RuleVersion.version == 1)
        .where(col(RuleVersion.created_at) > now - timedelta(hours=1))
    ).one()
    if int(proposed) >= MAX_PROPOSALS_PER_HOUR:
        raise RuleLimitReached(max=MAX_PROPOSALS_PER_HOUR)
    _write(session, org_id=agent.org_id, scope_id=agent.id, rule=candidate, active=True, actor=actor, now=now)
    _audit(
        session, org_id=agent.org_id, scope_id=agent.id, rule=candidate, change="added", actor=actor, now=now
    )
    return candidate, True
