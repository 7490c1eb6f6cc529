"""A rule set compiled once (`compile_rules`) decides exactly as the plain sequence of rules does,
for every payment, however many payments it has judged before and in whatever order: what it
remembers of a location is never the answer for another."""

from __future__ import annotations

import itertools
from dataclasses import replace
from decimal import Decimal

from server.policy.engine import Context, Payment, Usage, compile_rules, evaluate, judge_location
from server.policy.model import Policy
from server.policy.rules import Rule
from server.vocabulary import RuleKind, RuleScope, RuleWindow

POLICY = Policy(
    version=3,
    networks=("eip155:84532",),
    allow_hosts=("api.example.com", "*.data.example"),
    max_usd_per_tx=Decimal("1.00"),
    daily_cap_usd=Decimal("10.00"),
)
PAYEE = "0x1111111111111111111111111111111111111111"
RULES = (
    Rule("deny_premium", 1, RuleScope.ORG, RuleKind.DENY, path_prefix="/premium/"),
    Rule("deny_host", 2, RuleScope.TEAM, RuleKind.DENY, host="x.data.example"),
    Rule("hold_go", 1, RuleScope.AGENT, RuleKind.HOLD, path_prefix="/go/"),
    Rule("limit_all", 4, RuleScope.ORG, RuleKind.LIMIT, limit_atomic=50_000, window=RuleWindow.DAY),
    Rule(
        "limit_api",
        1,
        RuleScope.AGENT,
        RuleKind.LIMIT,
        host="api.example.com",
        limit_atomic=20_000,
        window=RuleWindow.WEEK,
    ),
    Rule(
        "limit_v1",
        1,
        RuleScope.TEAM,
        RuleKind.LIMIT,
        host="*.data.example",
        path_prefix="/v1",
        limit_atomic=5_000,
        window=RuleWindow.MONTH,
    ),
    Rule("member_cap", 1, RuleScope.MEMBER, RuleKind.LIMIT, limit_atomic=30_000, window=RuleWindow.DAY),
)
HOSTS = ("api.example.com", "x.data.example", "y.data.example", "other.example")
PATHS = ("/v1/search", "/premium/report", "/go/x", "/free")
VIAS: tuple[tuple[str, ...], ...] = ((), ("/go/start",), ("/premium/a",))
AMOUNTS = (None, 0, 1_000, 10_000, 40_000)
USAGES = (
    Usage(),
    Usage(rule_spent_atomic={"limit_all": 45_000, "limit_api": 15_000, "limit_v1": 4_000, "member_cap": 0}),
    Usage(spent_today_atomic=9_999_000, rule_spent_atomic={"member_cap": 29_000}),
)
CONTEXTS = (Context(pay_to_known=True), Context(has_member=True), Context())


def test_a_compiled_rule_set_decides_as_the_rules_do() -> None:
    compiled = compile_rules(RULES)
    assert compile_rules(compiled) is compiled
    cases = itertools.product(HOSTS, PATHS, VIAS, AMOUNTS, USAGES, CONTEXTS)
    checked = 0
    for host, path, via, amount, usage, context in cases:
        payment = Payment(host, path, "eip155:84532", "USDC", PAYEE, amount, host, via_paths=via)
        plain = evaluate(POLICY, list(RULES), usage, payment, context)
        again = evaluate(POLICY, compiled, usage, payment, context)
        assert again == plain, (host, path, via, amount, usage, context)
        assert again.versions == plain.versions
        located = judge_location(POLICY, compiled, host=host, path=path)
        assert located == judge_location(POLICY, RULES, host=host, path=path)
        checked += 1
    assert checked == len(HOSTS) * len(PATHS) * len(VIAS) * len(AMOUNTS) * len(USAGES) * len(CONTEXTS)


def test_what_a_rule_set_remembers_is_bounded_and_never_another_locations_answer() -> None:
    compiled = compile_rules(RULES)
    usage = Usage(rule_spent_atomic={"limit_api": 15_000})
    base = Payment("api.example.com", "/v1/a", "eip155:84532", "USDC", PAYEE, 10_000, "api.example.com")
    for index in range(1_000):  # more locations than it keeps
        payment = replace(base, path=f"/v1/{index}")
        decision = evaluate(POLICY, compiled, usage, payment, Context(pay_to_known=True))
        assert decision.reasons == ("rule_limit_exceeded",)
        assert decision.rules == ("limit_api",)
    other = evaluate(POLICY, compiled, usage, replace(base, host="y.data.example", resource_host=None))
    assert other.rules == ("limit_v1",)  # the limit of that host, not the one remembered before
