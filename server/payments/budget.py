"""The agent's budget, as get_budget reports it: today's spend against the daily cap, what every
limit rule of the agent, its team, its member and its organisation leaves, and the tightest of
them all (`effectiveCap`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlmodel import Session

from auth.principal import Principal, PrincipalKind
from server.catalog.service import listed_hosts
from server.chain.watch import recent_warnings
from server.kit.clock import isoformat, next_utc_midnight
from server.kit.money import atomic_to_usd, format_usd, usd_to_atomic
from server.models import Agent
from server.payments.results import usd
from server.payments.usage import rule_spent, usage_for
from server.policy.engine import host_allowed, via_catalog
from server.policy.model import Policy
from server.policy.rule_service import rules_for_agent
from server.policy.rules import Rule
from server.policy.service import current_policy
from server.policy.windows import window_end
from server.tenancy.service import get_agent

WARNING_LEVEL = Decimal("0.8")


def cap_level(spent: Decimal, cap: Decimal) -> str:
    if spent >= cap:
        return "exhausted"
    if spent >= cap * WARNING_LEVEL:
        return "warning"
    return "ok"


@dataclass(frozen=True)
class Limit:
    """One cap seen from this agent: how much it allows, how much is used, when it resets."""

    limited_by: str  # daily_cap | rule | member_cap
    scope: str  # agent | team | member | org
    cap_atomic: int
    spent_atomic: int
    resets_at: datetime
    rule: Rule | None = None

    @property
    def remaining_atomic(self) -> int:
        return max(self.cap_atomic - self.spent_atomic, 0)

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "limitedBy": self.limited_by,
            "scope": self.scope,
            "capUsd": format_usd(self.cap_atomic, atomic=True),
            "spentUsd": format_usd(self.spent_atomic, atomic=True),
            "remainingUsd": format_usd(self.remaining_atomic, atomic=True),
            "resetsAt": isoformat(self.resets_at),
        }
        if self.rule is not None:
            out["ruleId"] = self.rule.id
        return out


def _rule_limit(rule: Rule, spent: int, now: datetime, *, with_scope: bool) -> dict[str, Any]:
    assert rule.limit_atomic is not None
    assert rule.window is not None
    out: dict[str, Any] = {
        "ruleId": rule.id,
        "window": rule.window,
        "limitUsd": format_usd(rule.limit_atomic, atomic=True),
        "spentUsd": format_usd(spent, atomic=True),
        "remainingUsd": format_usd(max(rule.limit_atomic - spent, 0), atomic=True),
        "resetsAt": isoformat(window_end(rule.window, now)),
        "host": rule.host,
        "pathPrefix": rule.path_prefix,
        "source": rule.source,
    }
    if with_scope:
        out["scope"] = rule.scope
    return out


def _member(session: Session, agent: Agent, rules: list[Rule], spent: dict[str, int], now: datetime) -> Any:
    if agent.member_id is None:
        return None
    caps = [rule for rule in rules if rule.is_member_cap]
    if caps:
        tightest = min(caps, key=lambda rule: (rule.limit_atomic or 0) - spent.get(rule.id, 0))
        assert tightest.limit_atomic is not None
        used = spent.get(tightest.id, 0)
        cap: int | None = tightest.limit_atomic
    else:
        probe = Rule("member-spend", 1, "member", "limit", limit_atomic=0, window="day")
        used, cap = rule_spent(session, rule=probe, agent=agent, now=now), None
    return {
        "dailyCapUsd": None if cap is None else format_usd(cap, atomic=True),
        "spentTodayUsd": format_usd(used, atomic=True),
        "remainingTodayUsd": format_usd(0 if cap is None else max(cap - used, 0), atomic=True),
        "resetsAt": isoformat(window_end("day", now)),
    }


def _limits(
    agent: Agent, policy: Policy, rules: list[Rule], spent_today: int, spent: dict[str, int], now: datetime
) -> list[Limit]:
    """Every cap that bounds any payment of this agent (conditional rules bound only some)."""
    limits = [
        Limit("daily_cap", "agent", usd_to_atomic(policy.daily_cap_usd), spent_today, next_utc_midnight(now))
    ]
    member_caps = [rule for rule in rules if rule.is_member_cap]
    for rule in rules:
        if rule.kind != "limit" or rule.conditional or rule.limit_atomic is None or rule.window is None:
            continue
        limited_by = "member_cap" if rule.is_member_cap else "rule"
        limits.append(
            Limit(
                limited_by,
                rule.scope,
                rule.limit_atomic,
                spent.get(rule.id, 0),
                window_end(rule.window, now),
                rule,
            )
        )
    if agent.member_id is not None and not member_caps:
        limits.append(Limit("member_cap", "member", 0, 0, window_end("day", now)))
    return limits


def budget(session: Session, *, org_id: str, agent_id: str, now: datetime) -> dict[str, Any]:
    agent = get_agent(session, Principal(PrincipalKind.AGENT, org_id, agent_id), agent_id)
    policy = current_policy(session, agent.id)
    rules = rules_for_agent(session, agent, now=now)
    usage = usage_for(session, agent=agent, policy=policy, rules=rules, now=now)
    spent = dict(usage.rule_spent_atomic)
    spent_today = atomic_to_usd(usage.spent_today_atomic)
    remaining = max(policy.daily_cap_usd - spent_today, Decimal(0))

    limits = _limits(agent, policy, rules, usage.spent_today_atomic, spent, now)
    # The tightest cap wins; on a tie the agent's own daily cap is named.
    effective = min(limits, key=lambda limit: limit.remaining_atomic)
    limit_rules = [rule for rule in rules if rule.kind == "limit" and rule.window is not None]
    scope_limits = [
        _rule_limit(rule, spent.get(rule.id, 0), now, with_scope=True)
        for rule in limit_rules
        if rule.scope != "agent"
    ]
    catalog_hosts = [
        host
        for host in (listed_hosts(session) if policy.allow_catalog_hosts else [])
        if via_catalog(policy, host, listed=True) and host_allowed(policy, host, listed=True)
    ]
    out: dict[str, Any] = {
        "agentId": agent.id,
        "spentTodayUsd": format_usd(spent_today),
        "dailyCapUsd": format_usd(policy.daily_cap_usd),
        "remainingTodayUsd": format_usd(remaining),
        "maxUsdPerTx": format_usd(policy.max_usd_per_tx),
        "stepUpThresholdUsd": usd(policy.step_up_threshold_usd),
        "allowHosts": list(policy.allow_hosts),
        "catalogHosts": catalog_hosts,
        "capLevel": cap_level(atomic_to_usd(effective.spent_atomic), atomic_to_usd(effective.cap_atomic)),
        "effectiveCap": effective.document(),
        "ruleLimits": [
            _rule_limit(rule, spent.get(rule.id, 0), now, with_scope=False)
            for rule in limit_rules
            if rule.scope == "agent"
        ],
        "member": _member(session, agent, rules, spent, now),
        "network": policy.networks[0],
        "networks": list(policy.networks),
        "asset": "USDC",
        "dayResetsAt": isoformat(next_utc_midnight(now)),
        "policyVersion": policy.version,
        "warnings": recent_warnings(session, agent_id=agent.id, now=now),
    }
    if scope_limits:
        out["scopeLimits"] = scope_limits
    return out
