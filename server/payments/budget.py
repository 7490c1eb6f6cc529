"""The agent's budget, as get_budget reports it: today's spend against the daily cap, what every
limit rule of the agent, its team, its member and its organisation leaves, and the tightest of
them all (the effective cap)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from sqlmodel import Session

from auth.principal import Principal
from server.catalog.service import listed_hosts
from server.kit.clock import next_utc_midnight
from server.kit.money import atomic_to_usd, usd_to_atomic
from server.models import Agent, OutOfPolicyFinding, SellerCircuit, Wallet
from server.payments.circuits import open_circuits
from server.payments.settlement.watch import recent_findings
from server.payments.usage import usage_for
from server.policy.engine import host_allowed, via_catalog
from server.policy.model import Policy
from server.policy.rulebook import rules_for_agent
from server.policy.rules import Rule
from server.policy.windows import window_end
from server.tenancy.service import agent_with_policy
from server.vocabulary import RuleKind, RuleScope, RuleWindow
from server.wallets.service import active_wallet

WARNING_LEVEL = Decimal("0.8")


class CapLevel(StrEnum):
    OK = "ok"
    WARNING = "warning"  # from 80% of the cap
    EXHAUSTED = "exhausted"


class LimitedBy(StrEnum):
    DAILY_CAP = "daily_cap"
    RULE = "rule"
    MEMBER_CAP = "member_cap"


def cap_level(spent: Decimal, cap: Decimal) -> CapLevel:
    if spent >= cap:
        return CapLevel.EXHAUSTED
    if spent >= cap * WARNING_LEVEL:
        return CapLevel.WARNING
    return CapLevel.OK


@dataclass(frozen=True)
class Limit:
    """One cap seen from this agent: how much it allows, how much is used, when it resets."""

    limited_by: LimitedBy
    scope: RuleScope
    cap_atomic: int
    spent_atomic: int
    resets_at: datetime
    rule: Rule | None = None

    @property
    def remaining_atomic(self) -> int:
        return max(self.cap_atomic - self.spent_atomic, 0)


@dataclass(frozen=True)
class RuleUse:
    """A limit rule and what it has counted in its current window."""

    rule: Rule
    spent_atomic: int
    resets_at: datetime

    @property
    def limit_atomic(self) -> int:
        assert self.rule.limit_atomic is not None
        return self.rule.limit_atomic

    @property
    def remaining_atomic(self) -> int:
        return max(self.limit_atomic - self.spent_atomic, 0)


@dataclass(frozen=True)
class MemberCap:
    """The daily sub-cap of the person the agent belongs to (None: none is set, so nothing passes)."""

    cap_atomic: int | None
    spent_atomic: int
    resets_at: datetime

    @property
    def remaining_atomic(self) -> int:
        return 0 if self.cap_atomic is None else max(self.cap_atomic - self.spent_atomic, 0)


@dataclass(frozen=True)
class Budget:
    agent: Agent
    policy: Policy
    spent_today_atomic: int
    effective: Limit  # the tightest cap; on a tie, the agent's own daily cap
    rule_limits: list[RuleUse]  # the agent's own limit rules
    scope_limits: list[RuleUse]  # limit rules of its team, member and organisation
    member: MemberCap | None
    catalog_hosts: list[str]
    day_resets_at: datetime
    findings: list[OutOfPolicyFinding]  # out-of-policy movements of the last seven days
    wallet: Wallet | None  # the wallet the agent pays from
    day_cap_atomic: int  # the most one day's payments can take (day_cap_atomic below)
    circuits: list[SellerCircuit] = field(default_factory=list)  # hosts the organisation blocked

    @property
    def remaining_today_usd(self) -> Decimal:
        return max(self.policy.daily_cap_usd - atomic_to_usd(self.spent_today_atomic), Decimal(0))

    @property
    def cap_level(self) -> CapLevel:
        return cap_level(atomic_to_usd(self.effective.spent_atomic), atomic_to_usd(self.effective.cap_atomic))


# What the member's agents spent today, counted when the member has no sub-cap rule to count it.
_MEMBER_PROBE = Rule(
    "member-spend", 1, RuleScope.MEMBER, RuleKind.LIMIT, limit_atomic=0, window=RuleWindow.DAY
)


def _member(agent: Agent, rules: list[Rule], spent: dict[str, int], now: datetime) -> MemberCap | None:
    if agent.member_id is None:
        return None
    resets_at = window_end(RuleWindow.DAY, now)
    caps = [rule for rule in rules if rule.is_member_cap]
    if caps:
        tightest = min(caps, key=lambda rule: (rule.limit_atomic or 0) - spent.get(rule.id, 0))
        return MemberCap(tightest.limit_atomic, spent.get(tightest.id, 0), resets_at)
    return MemberCap(None, spent.get(_MEMBER_PROBE.id, 0), resets_at)


def _limits(
    agent: Agent, policy: Policy, rules: list[Rule], spent_today: int, spent: dict[str, int], now: datetime
) -> list[Limit]:
    """Every cap that bounds any payment of this agent (conditional rules bound only some)."""
    limits = [
        Limit(
            LimitedBy.DAILY_CAP,
            RuleScope.AGENT,
            usd_to_atomic(policy.daily_cap_usd),
            spent_today,
            next_utc_midnight(now),
        )
    ]
    member_caps = [rule for rule in rules if rule.is_member_cap]
    for rule in rules:
        if (
            rule.kind != RuleKind.LIMIT
            or rule.conditional
            or rule.limit_atomic is None
            or rule.window is None
        ):
            continue
        limited_by = LimitedBy.MEMBER_CAP if rule.is_member_cap else LimitedBy.RULE
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
        limits.append(Limit(LimitedBy.MEMBER_CAP, RuleScope.MEMBER, 0, 0, window_end(RuleWindow.DAY, now)))
    return limits


def day_cap_atomic(agent: Agent, policy: Policy, rules: list[Rule], *, now: datetime) -> int:
    """The most one day's payments can take: every cap that bounds them all counts a day or
    longer, so it is the tightest of them. A wallet holding less may fail a payment they allow."""
    return min(limit.cap_atomic for limit in _limits(agent, policy, rules, 0, {}, now))


def budget(session: Session, principal: Principal, *, agent_id: str, now: datetime) -> Budget:
    agent, policy = agent_with_policy(session, principal, agent_id)
    rules = rules_for_agent(session, agent, now=now)
    uncapped_member = agent.member_id is not None and not any(rule.is_member_cap for rule in rules)
    probes = [_MEMBER_PROBE] if uncapped_member else []
    usage = usage_for(session, agent=agent, policy=policy, rules=rules, now=now, probes=probes)
    spent = dict(usage.rule_spent_atomic)
    limits = _limits(agent, policy, rules, usage.spent_today_atomic, spent, now)
    uses = [
        RuleUse(rule, spent.get(rule.id, 0), window_end(rule.window, now))
        for rule in rules
        if rule.kind == RuleKind.LIMIT and rule.window is not None
    ]
    catalog_hosts = [
        host
        for host in (listed_hosts(session) if policy.allow_catalog_hosts else [])
        if via_catalog(policy, host, listed=True) and host_allowed(policy, host, listed=True)
    ]
    return Budget(
        agent=agent,
        wallet=active_wallet(session, agent),
        day_cap_atomic=min(limit.cap_atomic for limit in limits),  # as day_cap_atomic() says
        policy=policy,
        spent_today_atomic=usage.spent_today_atomic,
        effective=min(limits, key=lambda limit: limit.remaining_atomic),
        rule_limits=[use for use in uses if use.rule.scope == RuleScope.AGENT],
        scope_limits=[use for use in uses if use.rule.scope != RuleScope.AGENT],
        member=_member(agent, rules, spent, now),
        catalog_hosts=catalog_hosts,
        day_resets_at=next_utc_midnight(now),
        findings=recent_findings(session, principal, agent_id=agent.id, now=now),
        circuits=open_circuits(session, principal, now=now),
    )
