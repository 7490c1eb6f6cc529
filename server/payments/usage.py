"""Counted spend, as the policy engine needs it: per agent today and in the velocity window, and per
rule in the rule's own scope (agent, team, member, organisation), window and conditions.

Called inside the reservation transaction, under the organisation's lock, so what is counted is
exactly what is there when the decision is written. What counts is defined once, in
`repository.counted`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlmodel import Session

from server.catalog.service import listing_for
from server.kit.clock import utc_day_start
from server.models import Agent
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IntentRepository, SpendFilter
from server.policy.engine import CatalogListing, Context, Usage
from server.policy.model import Policy
from server.policy.rules import Rule
from server.policy.windows import window_start
from server.vocabulary import RuleKind, RuleScope


def rule_filter(rule: Rule, agent: Agent) -> SpendFilter:
    """The intents a limit rule counts, seen from `agent`: the rule's scope and conditions."""
    scope_id = {
        RuleScope.AGENT: agent.id,
        RuleScope.TEAM: agent.team_id,
        RuleScope.MEMBER: agent.member_id,
        RuleScope.ORG: agent.org_id,
    }[rule.scope]
    return SpendFilter(agent.org_id, rule.scope, scope_id, rule.host, rule.path_prefix)


def usage_for(
    session: Session,
    *,
    agent: Agent,
    policy: Policy,
    rules: Sequence[Rule],
    now: datetime,
    probes: Sequence[Rule] = (),
) -> Usage:
    """Every sum the policy needs, in one statement: the agent's day and velocity window, and each
    limit rule's scope and window (and each of `probes`, limit rules counted but not applied: their
    spend lands in `rule_spent_atomic` under their ids too)."""
    counting = [rule for rule in (*rules, *probes) if rule.kind == RuleKind.LIMIT and rule.window is not None]
    own = SpendFilter(agent.org_id, RuleScope.AGENT, agent.id)
    spends: list[tuple[SpendFilter, datetime]] = [
        (own, utc_day_start(now)),
        (own, now - timedelta(seconds=policy.velocity.window_seconds)),
    ]
    spends += [(rule_filter(rule, agent), window_start(rule.window, now)) for rule in counting]  # type: ignore[arg-type]
    sums = IntentRepository(session).counted_spends(spends, never_sent=NEVER_SENT_FAILURES)
    (spent_today, _), (window_spent, window_count) = sums[0], sums[1]
    return Usage(
        spent_today_atomic=spent_today,
        window_tx_count=window_count,
        window_spent_atomic=window_spent,
        rule_spent_atomic={rule.id: spent for rule, (spent, _) in zip(counting, sums[2:], strict=True)},
    )


def context_for(session: Session, *, agent: Agent, host: str, pay_to: str) -> Context:
    return context_of(
        agent,
        listing=listing_for(session, host),
        pay_to_known=IntentRepository(session).pay_to_known(org_id=agent.org_id, pay_to=pay_to),
    )


def context_of(agent: Agent, *, listing: CatalogListing | None, pay_to_known: bool) -> Context:
    """The facts beyond usage the policy needs: the catalog's listing of the host (None: not
    listed), whether the organisation paid this payee before, whether the agent has a member."""
    return Context(catalog=listing, pay_to_known=pay_to_known, has_member=agent.member_id is not None)
