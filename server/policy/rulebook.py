"""Store and read spending rules. A change never edits a row: it writes the rule's next version
(removal is a version with `active` false), and every change is an audit event.

Admins add rules of any scope and kind from the CLI; agents add only restrict-only chat rules
through propose_rule (see proposals); new agents get a default weekly rule. A rule is written for
a `RuleTarget` the caller resolved within its principal's reach (tenancy.service.rule_target);
changing or removing one looks it up by id within the principal's reach.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlmodel import Session

from auth.principal import Principal
from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.kit.money import format_usd, usd_to_atomic
from server.models import Agent, RuleVersion
from server.policy.proposals import MAX_ACTIVE_CHAT_RULES, MAX_PROPOSALS_PER_HOUR, Proposal
from server.policy.repository import RuleVersionRepository
from server.policy.rules import (
    WEEKLY_DEFAULT_FACTOR,
    Rule,
    RuleError,
    RuleReason,
    RuleTarget,
    clean_terms,
)
from server.policy.service import SudoRequired
from server.vocabulary import RuleKind, RuleScope, RuleSource, RuleWindow

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

    def __init__(self, reason: RuleReason, fields: Sequence[str]) -> None:
        self.reason = reason
        super().__init__(reason=str(reason), fields=list(fields))

    @classmethod
    def from_error(cls, error: RuleError) -> RuleRejected:
        return cls(error.reason, error.fields)


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


def parse_scope(text: str) -> RuleScope:
    """A rule scope given as text (agent, team, member, org)."""
    try:
        return RuleScope(text)
    except ValueError as exc:
        raise RuleRejected(RuleReason.INVALID_SCOPE, ["scope"]) from exc


# Rules by (id, version). A rule version is never changed once written (a change writes the next
# version), so a process builds each one once; which versions are in force is read on every call.
_RULES: dict[tuple[str, int], Rule] = {}
_RULES_KEPT = 16384


def current_rules(
    session: Session, *, org_id: str, scopes: Sequence[tuple[RuleScope, str]], now: datetime
) -> list[Rule]:
    """The rules in force (newest version active, not expired) for any of the (scope, id) pairs."""
    rules = []
    for row in RuleVersionRepository(session).in_force_rows(org_id=org_id, now=now, scopes=scopes):
        rule_id, version, scope, kind, host, path_prefix, limit_atomic, window, source, expires_at = row
        key = (rule_id, version)
        rule = _RULES.get(key)
        if rule is None:
            rule = Rule(
                rule_id, version, scope, kind, host, path_prefix, limit_atomic, window, source, expires_at
            )
            if len(_RULES) >= _RULES_KEPT:
                _RULES.clear()
            _RULES[key] = rule
        rules.append(rule)
    return rules


def agent_scopes(agent: Agent) -> list[tuple[RuleScope, str]]:
    scopes = [(RuleScope.AGENT, agent.id), (RuleScope.ORG, agent.org_id)]
    if agent.team_id:
        scopes.append((RuleScope.TEAM, agent.team_id))
    if agent.member_id:
        scopes.append((RuleScope.MEMBER, agent.member_id))
    return scopes


def rules_for_agent(session: Session, agent: Agent, *, now: datetime) -> list[Rule]:
    """Every rule that applies to the agent: its own, its team's, its member's, its organisation's."""
    return current_rules(session, org_id=agent.org_id, scopes=agent_scopes(agent), now=now)


def rules_of_org(session: Session, org_id: str, *, now: datetime) -> list[tuple[Rule, str]]:
    """Every rule in force in the organisation, with the id of what it is scoped to."""
    rows = RuleVersionRepository(session).in_force(org_id=org_id, now=now)
    return [(rule_from_row(row), row.scope_id) for row in rows]


def _active_row(session: Session, principal: Principal, rule_id: str) -> RuleVersion:
    """The rule's newest version, read again under its organisation's lock; it must be in force."""
    rules = RuleVersionRepository(session)
    row = rules.get_readable(principal, rule_id)
    if row is None:
        raise RuleNotFound()
    lock_org(session, row.org_id)
    row = rules.get_readable(principal, rule_id)
    if row is None or not row.active:
        raise RuleNotFound()
    return row


def _event(source: RuleSource, change: str) -> str:
    if source == RuleSource.CHAT and change == "added":
        return "policy.chat_rule_added"
    return f"policy.rule_{change}"


def _write(
    session: Session, *, target: RuleTarget, rule: Rule, active: bool, actor: str, now: datetime
) -> RuleVersion:
    return RuleVersionRepository(session).add(
        RuleVersion(
            rule_id=rule.id,
            version=rule.version,
            org_id=target.org_id,
            scope=rule.scope,
            scope_id=target.scope_id,
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
    )


def _target_of(row: RuleVersion) -> RuleTarget:
    return RuleTarget(row.scope, row.scope_id, row.org_id)


def add_rule(
    session: Session,
    *,
    target: RuleTarget,
    kind: str,
    host: str | None,
    path_prefix: str | None,
    limit_usd: Decimal | None,
    window: str | None,
    actor: str,
    now: datetime,
    source: RuleSource = RuleSource.ADMIN,
) -> Rule:
    """A new rule for `target`. Its terms are validated here, as a person gave them (a kind and a
    window are one of RuleKind's and RuleWindow's values)."""
    lock_org(session, target.org_id)
    try:
        terms = clean_terms(
            kind=kind,
            host=host,
            path_prefix=path_prefix,
            limit_atomic=None if limit_usd is None else usd_to_atomic(limit_usd),
            window=window,
        )
    except RuleError as exc:
        raise RuleRejected.from_error(exc) from exc
    clean_kind, clean_host, clean_path, limit_atomic, clean_window = terms
    rule = Rule(
        id=new_id("rule"),
        version=1,
        scope=target.scope,
        kind=clean_kind,
        host=clean_host,
        path_prefix=clean_path,
        limit_atomic=limit_atomic,
        window=clean_window,
        source=source,
    )
    _write(session, target=target, rule=rule, active=True, actor=actor, now=now)
    _audit(session, target=target, rule=rule, change="added", actor=actor, now=now)
    return rule


def _audit_data(rule: Rule, scope_id: str) -> dict[str, Any]:
    """What the audit log keeps of a rule version."""
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
        "scopeId": scope_id,
    }


def _audit(
    session: Session, *, target: RuleTarget, rule: Rule, change: str, actor: str, now: datetime
) -> None:
    audit(
        session,
        org_id=target.org_id,
        type=_event(rule.source, change),
        actor=actor,
        agent_id=target.scope_id if rule.scope == RuleScope.AGENT else None,
        subject_id=rule.id,
        data=_audit_data(rule, target.scope_id),
        now=now,
    )


def change_rule(
    session: Session, principal: Principal, *, rule_id: str, limit_usd: Decimal, now: datetime
) -> Rule:
    """A new version of a limit rule with another limit (the only term a person changes in place)."""
    row = _active_row(session, principal, rule_id)
    if row.kind != RuleKind.LIMIT:
        raise RuleRejected(RuleReason.LIMIT_ON_NON_LIMIT_RULE, ["limitUsd"])
    current = rule_from_row(row)
    updated = Rule(
        **{**vars(current), "version": current.version + 1, "limit_atomic": usd_to_atomic(limit_usd)}
    )
    target = _target_of(row)
    _write(session, target=target, rule=updated, active=True, actor=principal.actor, now=now)
    _audit(session, target=target, rule=updated, change="changed", actor=principal.actor, now=now)
    return updated


def rule_in_force(session: Session, principal: Principal, rule_id: str, *, now: datetime) -> tuple[Rule, str]:
    """The rule in force with this id within the principal's reach, and the id of what it is for."""
    row = RuleVersionRepository(session).get_readable(principal, rule_id) if len(rule_id) <= 40 else None
    if row is None or not row.active or (row.expires_at is not None and row.expires_at <= now):
        raise RuleNotFound()
    return rule_from_row(row), row.scope_id


def narrow_rule(
    session: Session, principal: Principal, *, rule_id: str, limit_usd: Decimal, now: datetime
) -> Rule:
    """`change_rule`, only when the new limit is no higher than the one in force: a higher limit
    widens what the rule lets through and raises SudoRequired (decided under the organisation's
    lock, on the version in force)."""
    row = _active_row(session, principal, rule_id)
    if row.kind != RuleKind.LIMIT:
        raise RuleRejected(RuleReason.LIMIT_ON_NON_LIMIT_RULE, ["limitUsd"])
    if row.limit_atomic is not None and usd_to_atomic(limit_usd) > row.limit_atomic:
        raise SudoRequired(widens=("limitUsd",))
    return change_rule(session, principal, rule_id=rule_id, limit_usd=limit_usd, now=now)


def remove_rule(session: Session, principal: Principal, *, rule_id: str, now: datetime) -> Rule:
    """A final version of the rule that is no longer in force."""
    row = _active_row(session, principal, rule_id)
    current = rule_from_row(row)
    removed = Rule(**{**vars(current), "version": current.version + 1})
    target = _target_of(row)
    _write(session, target=target, rule=removed, active=False, actor=principal.actor, now=now)
    _audit(session, target=target, rule=removed, change="removed", actor=principal.actor, now=now)
    return removed


def create_default_rules(
    session: Session, *, agent: Agent, daily_cap_usd: Decimal, actor: str, now: datetime
) -> Rule:
    """A new agent's weekly limit: 5 x its daily cap, an ordinary rule from then on."""
    rule = Rule(
        id=new_id("rule"),
        version=1,
        scope=RuleScope.AGENT,
        kind=RuleKind.LIMIT,
        limit_atomic=usd_to_atomic(daily_cap_usd) * WEEKLY_DEFAULT_FACTOR,
        window=RuleWindow.WEEK,
        source=RuleSource.DEFAULT,
    )
    target = RuleTarget(RuleScope.AGENT, agent.id, agent.org_id)
    _write(session, target=target, rule=rule, active=True, actor=actor, now=now)
    _audit(session, target=target, rule=rule, change="added", actor=actor, now=now)
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
        scope=RuleScope.AGENT,
        kind=proposal.kind,
        host=proposal.host,
        path_prefix=proposal.path_prefix,
        limit_atomic=proposal.limit_atomic,
        window=proposal.window,
        source=RuleSource.CHAT,
        expires_at=now + timedelta(hours=proposal.expires_in_hours),
    )
    in_force = current_rules(session, org_id=agent.org_id, scopes=[(RuleScope.AGENT, agent.id)], now=now)
    for rule in in_force:
        if rule.same_terms(candidate):
            return rule, False
    if sum(1 for rule in in_force if rule.source == RuleSource.CHAT) >= MAX_ACTIVE_CHAT_RULES:
        raise RuleLimitReached(max=MAX_ACTIVE_CHAT_RULES)
    proposed = RuleVersionRepository(session).chat_rules_proposed_since(
        org_id=agent.org_id, agent_id=agent.id, since=now - timedelta(hours=1)
    )
    if proposed >= MAX_PROPOSALS_PER_HOUR:
        raise RuleLimitReached(max=MAX_PROPOSALS_PER_HOUR)
    target = RuleTarget(RuleScope.AGENT, agent.id, agent.org_id)
    _write(session, target=target, rule=candidate, active=True, actor=actor, now=now)
    _audit(session, target=target, rule=candidate, change="added", actor=actor, now=now)
    return candidate, True
