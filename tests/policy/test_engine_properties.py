"""Properties of the policy engine, for any payments, rules and clock steps:

- counted spend in every window never exceeds its cap (daily cap, every limit rule in its scope);
- an allowed payment passes every rule, and a denial lists every rule that fails;
- nothing a tool call can add (a propose_rule rule) ever widens what the policy allows.

The oracle below restates each rule in the plainest way, independently of the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.policy.engine import REASON_ORDER, CatalogListing, Context, Payment, Usage, evaluate
from server.policy.model import ChallengeRules, Policy, Velocity
from server.policy.proposals import parse_proposal
from server.policy.rules import Rule, RuleError
from server.policy.windows import window_start
from server.vocabulary import RuleKind, RuleScope, RuleSource, RuleWindow
from tests.support.clocks import written

AGENTS = (0, 1, 2)
TEAM = {0, 1}  # the team's agents
MEMBER = {1, 2}  # the member's agents
HOSTS = ("api.example.com", "data.example.com", "other.test")
PATHS = ("/v1/search", "/v1/report", "/v2/x")
PAYEES = ("0x" + "1" * 40, "0x" + "2" * 40)
NETWORK = "eip155:84532"
RANK = {"allow": 0, "hold": 1, "deny": 2}

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class Entry:
    at: datetime
    agent: int
    host: str
    path: str
    amount: int


def group(rule: Rule, owner: int) -> set[int]:
    """The agents whose payments a rule of this scope counts (and applies to)."""
    return {"agent": {owner}, "team": TEAM, "member": MEMBER, "org": set(AGENTS)}[rule.scope]


usd_amounts = st.integers(min_value=0, max_value=1_000_000).map(lambda a: Decimal(a) / 10**6)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    return Policy(
        version=draw(st.integers(1, 50)),
        networks=(NETWORK,),
        allow_hosts=tuple(
            draw(
                st.lists(
                    st.sampled_from(("api.example.com", "*.example.com", "other.test")),
                    max_size=3,
                    unique=True,
                )
            )
        ),
        deny_hosts=tuple(draw(st.lists(st.sampled_from(HOSTS), max_size=1))),
        max_usd_per_tx=draw(usd_amounts),
        daily_cap_usd=draw(usd_amounts),
        step_up_threshold_usd=draw(st.none() | usd_amounts),
        pay_to_deny=tuple(draw(st.lists(st.sampled_from(PAYEES), max_size=1))),
        velocity=Velocity(
            max_tx=draw(st.none() | st.integers(1, 5)),
            max_usd=draw(st.none() | usd_amounts),
            window_seconds=draw(st.sampled_from((60, 3600))),
        ),
        challenge=ChallengeRules(
            hosts=tuple(draw(st.lists(st.sampled_from(("*.example.com", "other.test")), max_size=1))),
            path_prefixes=tuple(draw(st.lists(st.sampled_from(("/v1/", "/v2/")), max_size=1))),
            max_usd=draw(st.none() | usd_amounts),
        ),
        allow_catalog_hosts=draw(st.booleans()),
        verified_sellers_only=draw(st.booleans()),
    )


@st.composite
def rule_sets(draw: st.DrawFn) -> list[tuple[Rule, int]]:
    """Rules with the agent that owns them (used only for agent-scoped rules)."""
    out: list[tuple[Rule, int]] = []
    for index in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from((RuleKind.LIMIT, RuleKind.LIMIT, RuleKind.DENY, RuleKind.HOLD)))
        scope = draw(st.sampled_from(tuple(RuleScope)))
        limit = draw(st.integers(0, 500_000)) if kind == RuleKind.LIMIT else None
        window = draw(st.sampled_from(tuple(RuleWindow))) if kind == RuleKind.LIMIT else None
        rule = Rule(
            id=f"r{index}",
            version=draw(st.integers(1, 9)),
            scope=scope,
            kind=kind,
            host=draw(st.none() | st.sampled_from(("api.example.com", "*.example.com"))),
            path_prefix=draw(st.none() | st.sampled_from(("/v1/", "/v2/"))),
            limit_atomic=limit,
            window=window,
        )
        out.append((rule, draw(st.sampled_from(AGENTS))))
    return out


payments = st.builds(
    Payment,
    host=st.sampled_from(HOSTS),
    path=st.sampled_from(PATHS),
    network=st.sampled_from((NETWORK, "eip155:8453")),
    asset=st.sampled_from(("USDC", None)),
    pay_to=st.sampled_from(PAYEES),
    amount_atomic=st.none() | st.integers(-1, 400_000),
    resource_host=st.none() | st.sampled_from(HOSTS),
    instruction_like_description=st.booleans(),
)
contexts = st.builds(
    Context,
    catalog=st.none() | st.builds(CatalogListing, st.frozensets(st.sampled_from(PAYEES), max_size=1)),
    pay_to_known=st.booleans(),
    has_member=st.booleans(),
)
usages = st.builds(
    Usage,
    spent_today_atomic=st.integers(0, 1_000_000),
    window_tx_count=st.integers(0, 6),
    window_spent_atomic=st.integers(0, 1_000_000),
    rule_spent_atomic=st.dictionaries(st.sampled_from([f"r{i}" for i in range(6)]), st.integers(0, 600_000)),
)


def atomic(usd: Decimal) -> int:
    return int(usd * 10**6)


def matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host != pattern[2:]
    return host == pattern


def oracle(policy: Policy, rules: list[Rule], usage: Usage, p: Payment, ctx: Context) -> set[str]:
    """Every denial reason, restated rule by rule."""
    failing: set[str] = set()
    denied_host = any(matches(h, p.host) for h in policy.deny_hosts)
    in_allow = any(matches(h, p.host) for h in policy.allow_hosts)
    listed = ctx.catalog is not None
    if denied_host or not (in_allow or (policy.allow_catalog_hosts and listed)):
        failing.add("host_not_allowed")
    if p.resource_host is not None and p.resource_host != p.host:
        failing.add("resource_host_mismatch")
    if p.network not in policy.networks:
        failing.add("network_not_allowed")
    if p.asset != "USDC":
        failing.add("asset_not_allowed")
    if p.pay_to.lower() in [a.lower() for a in policy.pay_to_deny]:
        failing.add("pay_to_denied")
    catalog_only = policy.allow_catalog_hosts and listed and not in_allow and not denied_host
    if policy.verified_sellers_only or catalog_only:
        if ctx.catalog is None:
            failing.add("seller_not_verified")
        elif ctx.catalog.pinned_pay_to and p.pay_to.lower() not in ctx.catalog.pinned_pay_to:
            failing.add("pay_to_not_verified")
    if policy.challenge.hosts and not any(matches(h, p.host) for h in policy.challenge.hosts):
        failing.add("challenge_host_not_allowed")
    if policy.challenge.path_prefixes and not any(
        p.path.startswith(x) for x in policy.challenge.path_prefixes
    ):
        failing.add("challenge_path_not_allowed")
    selected = [
        r
        for r in rules
        if (r.host is None or matches(r.host, p.host))
        and (r.path_prefix is None or p.path.startswith(r.path_prefix))
    ]
    if any(r.kind == "deny" for r in selected):
        failing.add("rule_denied")
    caps = [
        r
        for r in rules
        if r.scope == "member"
        and r.kind == "limit"
        and r.window == "day"
        and r.host is None
        and r.path_prefix is None
    ]
    amount = p.amount_atomic
    valid = amount is not None and amount > 0
    if ctx.has_member and not caps:
        failing.add("member_cap_exceeded")
    if not valid:
        failing.add("invalid_amount")
        return failing
    assert amount is not None

    def over(r: Rule) -> bool:
        assert r.limit_atomic is not None
        return usage.rule_spent_atomic.get(r.id, 0) + amount > r.limit_atomic

    if ctx.has_member and any(over(r) for r in caps):
        failing.add("member_cap_exceeded")
    if any(r.kind == "limit" and r not in caps and over(r) for r in selected):
        failing.add("rule_limit_exceeded")
    if amount > atomic(policy.max_usd_per_tx):
        failing.add("amount_exceeds_per_transaction")
    if usage.spent_today_atomic + amount > atomic(policy.daily_cap_usd):
        failing.add("daily_cap_exceeded")
    if policy.velocity.max_tx is not None and usage.window_tx_count >= policy.velocity.max_tx:
        failing.add("velocity_tx_exceeded")
    if policy.velocity.max_usd is not None and usage.window_spent_atomic + amount > atomic(
        policy.velocity.max_usd
    ):
        failing.add("velocity_usd_exceeded")
    if policy.challenge.max_usd is not None and amount > atomic(policy.challenge.max_usd):
        failing.add("challenge_amount_exceeded")
    return failing


@PROPERTY_SETTINGS
@given(policies(), rule_sets(), usages, payments, contexts)
def test_allowed_passes_every_rule_and_a_denial_lists_every_failure(
    policy: Policy, owned: list[tuple[Rule, int]], usage: Usage, payment: Payment, context: Context
) -> None:
    rules = [rule for rule, _ in owned]
    decision = evaluate(policy, rules, usage, payment, context)
    expected = oracle(policy, rules, usage, payment, context)
    assert set(decision.reasons) == expected
    assert list(decision.reasons) == [code for code in REASON_ORDER if code in expected]
    assert (decision.outcome == "deny") == bool(expected)
    assert decision.versions["rules"] == {rule.id: rule.version for rule in rules}


steps = st.lists(
    st.tuples(
        st.sampled_from((0, 1, 59, 3_600, 20 * 3_600, 86_400, 3 * 86_400, 9 * 86_400)),
        st.sampled_from(AGENTS),
        st.sampled_from(HOSTS),
        st.sampled_from(PATHS),
        st.integers(1, 300_000),
    ),
    min_size=1,
    max_size=40,
)


def spent(entries: list[Entry], agents: set[int], since: datetime, rule: Rule | None = None) -> int:
    return sum(
        e.amount
        for e in entries
        if e.agent in agents
        and e.at >= since
        and (
            rule is None
            or (
                (rule.host is None or matches(rule.host, e.host))
                and (rule.path_prefix is None or e.path.startswith(rule.path_prefix))
            )
        )
    )


@PROPERTY_SETTINGS
@given(
    policies(),
    rule_sets(),
    steps,
    st.datetimes(
        min_value=written(2026, 1, 1).replace(tzinfo=None),
        max_value=written(2027, 12, 31).replace(tzinfo=None),
        timezones=st.just(UTC),
    ),
)
def test_counted_spend_never_exceeds_any_cap(
    policy: Policy,
    owned: list[tuple[Rule, int]],
    moves: list[tuple[int, int, str, str, int]],
    start: datetime,
) -> None:
    policy = replace(
        policy, allow_hosts=("*.example.com", "other.test"), deny_hosts=(), challenge=ChallengeRules()
    )
    ledger: list[Entry] = []
    now = start
    for advance, agent, host, path, amount in moves:
        now += timedelta(seconds=advance)
        mine = [rule for rule, owner in owned if agent in group(rule, owner)]
        usage = Usage(
            spent_today_atomic=spent(ledger, {agent}, window_start(RuleWindow.DAY, now)),
            window_tx_count=sum(
                1
                for e in ledger
                if e.agent == agent and e.at >= now - timedelta(seconds=policy.velocity.window_seconds)
            ),
            window_spent_atomic=spent(
                ledger, {agent}, now - timedelta(seconds=policy.velocity.window_seconds)
            ),
            rule_spent_atomic={
                rule.id: spent(ledger, group(rule, owner), window_start(rule.window, now), rule)
                for rule, owner in owned
                if rule.kind == "limit" and rule.window is not None and agent in group(rule, owner)
            },
        )
        payment = Payment(host, path, NETWORK, "USDC", PAYEES[0], amount, host)
        context = Context(pay_to_known=True, has_member=agent in MEMBER)
        decision = evaluate(policy, mine, usage, payment, context)
        if decision.outcome != "deny":  # a hold is paid once a human approves it
            ledger.append(Entry(now, agent, host, path, amount))

        for each in AGENTS:
            assert spent(ledger, {each}, window_start(RuleWindow.DAY, now)) <= atomic(policy.daily_cap_usd)
        for rule, owner in owned:
            if rule.kind == "limit" and rule.window is not None and rule.limit_atomic is not None:
                assert (
                    spent(ledger, group(rule, owner), window_start(rule.window, now), rule)
                    <= rule.limit_atomic
                )
        if policy.velocity.max_usd is not None:
            for each in AGENTS:
                recent = spent(ledger, {each}, now - timedelta(seconds=policy.velocity.window_seconds))
                assert recent <= atomic(policy.velocity.max_usd)


wild_proposals = st.fixed_dictionaries(
    {"kind": st.sampled_from(("limit", "deny", "hold", "allow", "raise", None))},
    optional={
        "limitUsd": st.one_of(
            st.none(),
            st.sampled_from(("0", "0.05", "2", "-1", "1e9", "abc")),
            st.integers(-5, 10),
            st.floats(),
        ),
        "window": st.sampled_from(("day", "week", "month", "year", "")),
        "host": st.sampled_from(("api.example.com", "*.example.com", "*", "", "exa mple.com")),
        "pathPrefix": st.sampled_from(("/v1/", "/", "v1", "/a b")),
        "expiresInHours": st.one_of(st.integers(-2, 3000), st.booleans()),
    },
)
conditions = st.fixed_dictionaries(
    {},
    optional={
        "host": st.sampled_from(("api.example.com", "*.example.com")),
        "pathPrefix": st.sampled_from(("/v1/", "/v2/")),
    },
)
valid_proposals = st.one_of(
    st.builds(
        lambda terms, limit, window: {
            "kind": "limit",
            "limitUsd": limit,
            **({"window": window} if window else {}),
            **terms,
        },
        conditions,
        st.sampled_from(("0", "0.01", "0.05", "0.3")),
        st.sampled_from((None, "day", "week", "month")),
    ),
    conditions.filter(bool).map(lambda terms: {"kind": "deny", **terms}),
)
proposal_inputs = st.one_of(valid_proposals, wild_proposals)


@PROPERTY_SETTINGS
@given(policies(), rule_sets(), usages, payments, contexts, proposal_inputs, st.integers(0, 600_000))
def test_no_proposed_rule_can_widen_what_the_policy_allows(
    policy: Policy,
    owned: list[tuple[Rule, int]],
    usage: Usage,
    payment: Payment,
    context: Context,
    arguments: dict[str, Any],
    chat_spent: int,
) -> None:
    try:
        proposal = parse_proposal(arguments)
    except RuleError:
        return  # refused: nothing is added, so nothing can widen
    assert proposal.kind in ("limit", "deny")
    chat = Rule(
        "chat-0000abcd",
        1,
        RuleScope.AGENT,
        proposal.kind,
        host=proposal.host,
        path_prefix=proposal.path_prefix,
        limit_atomic=proposal.limit_atomic,
        window=proposal.window,
        source=RuleSource.CHAT,
    )
    rules = [rule for rule, _ in owned]
    before = evaluate(policy, rules, usage, payment, context)
    with_chat = replace(usage, rule_spent_atomic={**usage.rule_spent_atomic, chat.id: chat_spent})
    after = evaluate(policy, [*rules, chat], with_chat, payment, context)
    assert RANK[after.outcome] >= RANK[before.outcome]
    assert set(before.reasons) <= set(after.reasons)
    if before.outcome == "hold" and after.outcome == "hold":
        assert after.hold_reason == before.hold_reason


@pytest.mark.parametrize(
    "extra", [{"scope": "org"}, {"scope": "team"}, {"allowHosts": ["x.test"]}, {"raiseCap": True}]
)
def test_a_proposal_cannot_choose_its_scope_or_anything_beyond_its_terms(extra: dict[str, Any]) -> None:
    with pytest.raises(RuleError) as caught:
        parse_proposal({"kind": "limit", "limitUsd": "1", **extra})
    assert caught.value.reason == "unknown_field"
    assert caught.value.fields == tuple(extra)
