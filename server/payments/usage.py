"""Counted spend, as the policy engine needs it: per agent today and in the velocity window, and per
rule in the rule's own scope (agent, team, member, organisation), window and conditions.

Called inside the reservation transaction, under the organisation's lock, so what is counted is
exactly what is there when the decision is written. A payment counts from its authorisation; a
failed or expired one keeps counting until its authorisation's `validBefore` has passed.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_
from sqlmodel import Session, col, select

from server.catalog.service import listing_for
from server.kit.clock import utc_day_start
from server.models import Agent, PaymentIntent
from server.payments.states import COUNTED, COUNTED_UNTIL_VALID_BEFORE, SENT
from server.policy.engine import Context, Usage
from server.policy.model import Policy
from server.policy.rules import Rule
from server.policy.windows import window_start


def counted_clause(now_unix: int) -> Any:
    return or_(
        col(PaymentIntent.status).in_(COUNTED),
        and_(
            col(PaymentIntent.status).in_(COUNTED_UNTIL_VALID_BEFORE),
            col(PaymentIntent.valid_before) > now_unix,
        ),
    )


def _spent(session: Session, *clauses: Any, since: datetime, now: datetime) -> tuple[int, int]:
    row = session.exec(
        select(func.coalesce(func.sum(PaymentIntent.amount_atomic), 0), func.count())
        .where(*clauses)
        .where(col(PaymentIntent.authorized_at) >= since)
        .where(counted_clause(int(now.timestamp())))
    ).one()
    return int(row[0]), int(row[1])


def spent_since(session: Session, *, agent_id: str, since: datetime, now: datetime) -> tuple[int, int]:
    """(atomic amount, number of payments) counted for the agent since `since`."""
    return _spent(session, PaymentIntent.agent_id == agent_id, since=since, now=now)


def _scope_clause(rule: Rule, agent: Agent) -> Any:
    if rule.scope == "agent":
        return col(PaymentIntent.agent_id) == agent.id
    if rule.scope == "team":
        return col(PaymentIntent.agent_id).in_(select(Agent.id).where(Agent.team_id == agent.team_id))
    if rule.scope == "member":
        return col(PaymentIntent.agent_id).in_(select(Agent.id).where(Agent.member_id == agent.member_id))
    return col(PaymentIntent.org_id) == agent.org_id


def _condition_clauses(rule: Rule) -> list[Any]:
    clauses: list[Any] = []
    host = col(PaymentIntent.host)
    if rule.host is not None:
        if rule.host.startswith("*."):
            suffix = rule.host[1:]  # ".example.com": subdomains only, never the apex
            clauses.append(func.length(host) > len(suffix))
            clauses.append(func.substr(host, func.length(host) - len(suffix) + 1) == suffix)
        else:
            clauses.append(host == rule.host)
    if rule.path_prefix is not None:
        # substr, not LIKE: LIKE ignores case on SQLite and would treat % and _ as wildcards.
        clauses.append(func.substr(col(PaymentIntent.path), 1, len(rule.path_prefix)) == rule.path_prefix)
    return clauses


def rule_spent(session: Session, *, rule: Rule, agent: Agent, now: datetime) -> int:
    """What a limit rule has counted so far in its current window, seen from `agent`."""
    assert rule.window is not None
    since = window_start(rule.window, now)
    spent, _ = _spent(
        session,
        org_clause(agent),
        _scope_clause(rule, agent),
        *_condition_clauses(rule),
        since=since,
        now=now,
    )
    return spent


def org_clause(agent: Agent) -> Any:
    return col(PaymentIntent.org_id) == agent.org_id


def usage_for(session: Session, *, agent: Agent, policy: Policy, rules: list[Rule], now: datetime) -> Usage:
    spent_today, _ = spent_since(session, agent_id=agent.id, since=utc_day_start(now), now=now)
    window_start_at = now - timedelta(seconds=policy.velocity.window_seconds)
    window_spent, window_count = spent_since(session, agent_id=agent.id, since=window_start_at, now=now)
    return Usage(
        spent_today_atomic=spent_today,
        window_tx_count=window_count,
        window_spent_atomic=window_spent,
        rule_spent_atomic={
            rule.id: rule_spent(session, rule=rule, agent=agent, now=now)
            for rule in rules
            if rule.kind == "limit" and rule.window is not None
        },
    )


def pay_to_known(session: Session, *, org_id: str, pay_to: str) -> bool:
    """Whether the organisation ever sent a payment to this payee (any agent)."""
    found = session.exec(
        select(PaymentIntent.id)
        .where(PaymentIntent.org_id == org_id)
        .where(func.lower(PaymentIntent.pay_to) == pay_to.lower())
        .where(col(PaymentIntent.status).in_(SENT))
        .limit(1)
    ).first()
    return found is not None


def context_for(session: Session, *, agent: Agent, host: str, pay_to: str) -> Context:
    return Context(
        catalog=listing_for(session, host),
        pay_to_known=pay_to_known(session, org_id=agent.org_id, pay_to=pay_to),
        has_member=agent.member_id is not None,
    )
