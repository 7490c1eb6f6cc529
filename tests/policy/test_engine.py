"""The policy engine as a table: one row per denial reason and per hold reason, each produced by
the smallest change to a payment that passes everything."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from server.policy.engine import (
    HOLD_ORDER,
    REASON_ORDER,
    CatalogListing,
    Context,
    Payment,
    Usage,
    evaluate,
    host_allowed,
)
from server.policy.model import ChallengeRules, Policy, Velocity
from server.policy.rules import Rule
from server.vocabulary import RuleKind, RuleScope, RuleWindow

PAYEE = "0x1111111111111111111111111111111111111111"
OTHER = "0x2222222222222222222222222222222222222222"
CENT = 10_000  # 0.01 USDC

POLICY = Policy(
    version=3,
    networks=("eip155:84532",),
    allow_hosts=("api.example.com", "*.data.example"),
    max_usd_per_tx=Decimal("0.10"),
    daily_cap_usd=Decimal("1.00"),
)
PAYMENT = Payment(
    host="api.example.com",
    path="/v1/search",
    network="eip155:84532",
    asset="USDC",
    pay_to=PAYEE,
    amount_atomic=CENT,
    resource_host="api.example.com",
)
KNOWN = Context(pay_to_known=True)


def limit(rule_id: str, usd: str, *, scope: str = "agent", window: str = "day", **terms: Any) -> Rule:
    return Rule(
        id=rule_id,
        version=1,
        scope=RuleScope(scope),
        kind=RuleKind.LIMIT,
        limit_atomic=int(Decimal(usd) * 1_000_000),
        window=RuleWindow(window),
        **terms,
    )


def test_the_base_payment_is_allowed() -> None:
    decision = evaluate(POLICY, (), Usage(), PAYMENT, KNOWN)
    assert decision.outcome == "allow"
    assert decision.reasons == ()
    assert decision.versions == {"policy": 3, "rules": {}}


DENIALS: list[tuple[str, Policy, tuple[Rule, ...], Usage, Payment, Context]] = [
    (
        "host_not_allowed",
        POLICY,
        (),
        Usage(),
        replace(PAYMENT, host="evil.example", resource_host=None),
        KNOWN,
    ),
    ("resource_host_mismatch", POLICY, (), Usage(), replace(PAYMENT, resource_host="evil.example"), KNOWN),
    ("network_not_allowed", POLICY, (), Usage(), replace(PAYMENT, network="eip155:8453"), KNOWN),
    ("asset_not_allowed", POLICY, (), Usage(), replace(PAYMENT, asset=None), KNOWN),
    (
        "pay_to_denied",
        replace(POLICY, pay_to_deny=(PAYEE.upper().replace("0X", "0x"),)),
        (),
        Usage(),
        PAYMENT,
        KNOWN,
    ),
    ("seller_not_verified", replace(POLICY, verified_sellers_only=True), (), Usage(), PAYMENT, KNOWN),
    (
        "pay_to_not_verified",
        replace(POLICY, verified_sellers_only=True),
        (),
        Usage(),
        PAYMENT,
        Context(catalog=CatalogListing(frozenset({OTHER})), pay_to_known=True),
    ),
    ("invalid_amount", POLICY, (), Usage(), replace(PAYMENT, amount_atomic=None), KNOWN),
    ("amount_exceeds_per_transaction", POLICY, (), Usage(), replace(PAYMENT, amount_atomic=110_000), KNOWN),
    ("daily_cap_exceeded", POLICY, (), Usage(spent_today_atomic=995_000), PAYMENT, KNOWN),
    ("member_cap_exceeded", POLICY, (), Usage(), PAYMENT, Context(pay_to_known=True, has_member=True)),
    (
        "rule_denied",
        POLICY,
        (Rule("r_deny", 2, RuleScope.TEAM, RuleKind.DENY, host="api.example.com"),),
        Usage(),
        PAYMENT,
        KNOWN,
    ),
    (
        "rule_limit_exceeded",
        POLICY,
        (limit("r_week", "0.05", scope="org", window="week"),),
        Usage(rule_spent_atomic={"r_week": 45_000}),
        PAYMENT,
        KNOWN,
    ),
    (
        "velocity_tx_exceeded",
        replace(POLICY, velocity=Velocity(max_tx=3)),
        (),
        Usage(window_tx_count=3),
        PAYMENT,
        KNOWN,
    ),
    (
        "velocity_usd_exceeded",
        replace(POLICY, velocity=Velocity(max_usd=Decimal("0.02"))),
        (),
        Usage(window_spent_atomic=15_000),
        PAYMENT,
        KNOWN,
    ),
    (
        "challenge_host_not_allowed",
        replace(POLICY, challenge=ChallengeRules(hosts=("*.data.example",))),
        (),
        Usage(),
        PAYMENT,
        KNOWN,
    ),
    (
        "challenge_path_not_allowed",
        replace(POLICY, challenge=ChallengeRules(path_prefixes=("/v2/",))),
        (),
        Usage(),
        PAYMENT,
        KNOWN,
    ),
    (
        "challenge_amount_exceeded",
        replace(POLICY, challenge=ChallengeRules(max_usd=Decimal("0.005"))),
        (),
        Usage(),
        PAYMENT,
        KNOWN,
    ),
]


@pytest.mark.parametrize(
    ("reason", "policy", "rules", "usage", "payment", "context"), DENIALS, ids=[d[0] for d in DENIALS]
)
def test_each_denial_reason(
    reason: str, policy: Policy, rules: tuple[Rule, ...], usage: Usage, payment: Payment, context: Context
) -> None:
    decision = evaluate(policy, rules, usage, payment, context)
    assert decision.outcome == "deny"
    assert decision.reasons == (reason,)


def test_the_table_covers_every_reason() -> None:
    assert sorted(row[0] for row in DENIALS) == sorted(REASON_ORDER)


def test_rule_denials_name_the_rules_and_their_scopes() -> None:
    rules = (
        Rule("r_deny", 2, RuleScope.TEAM, RuleKind.DENY, path_prefix="/v1/"),
        limit("r_org", "0.05", scope="org", window="month"),
        limit("r_other_host", "0.00", host="other.example"),  # not selected by this payment
    )
    usage = Usage(rule_spent_atomic={"r_org": 45_000})
    decision = evaluate(POLICY, rules, usage, PAYMENT, KNOWN)
    assert decision.reasons == ("rule_denied", "rule_limit_exceeded")
    assert decision.rules == ("r_deny", "r_org")
    assert decision.rule_scopes == {"r_deny": "team", "r_org": "org"}
    assert decision.versions == {"policy": 3, "rules": {"r_deny": 2, "r_org": 1, "r_other_host": 1}}


def test_a_member_sub_cap_counts_the_members_spend_and_allows_under_it() -> None:
    context = Context(pay_to_known=True, has_member=True)
    cap = limit("r_member", "0.05", scope="member")
    assert evaluate(POLICY, (cap,), Usage(rule_spent_atomic={"r_member": 40_000}), PAYMENT, context).allowed
    denied = evaluate(POLICY, (cap,), Usage(rule_spent_atomic={"r_member": 41_000}), PAYMENT, context)
    assert denied.reasons == ("member_cap_exceeded",)
    # A conditional or non-daily member rule is an ordinary rule, not the sub-cap.
    weekly = limit("r_member_week", "0.05", scope="member", window="week")
    assert evaluate(POLICY, (weekly,), Usage(), PAYMENT, context).reasons == ("member_cap_exceeded",)


def test_a_denial_lists_every_failing_rule_in_order() -> None:
    policy = replace(POLICY, verified_sellers_only=True, velocity=Velocity(max_tx=1))
    payment = replace(PAYMENT, host="evil.example", network="eip155:8453", amount_atomic=2_000_000)
    decision = evaluate(policy, (), Usage(spent_today_atomic=0, window_tx_count=1), payment, KNOWN)
    assert decision.reasons == (
        "host_not_allowed",
        "resource_host_mismatch",
        "network_not_allowed",
        "seller_not_verified",
        "amount_exceeds_per_transaction",
        "daily_cap_exceeded",
        "velocity_tx_exceeded",
    )


def test_wildcards_match_subdomains_only_and_an_empty_list_allows_nothing() -> None:
    assert host_allowed(POLICY, "a.data.example")
    assert host_allowed(POLICY, "b.a.data.example")
    assert not host_allowed(POLICY, "data.example")
    assert not host_allowed(replace(POLICY, allow_hosts=()), "api.example.com")
    assert not host_allowed(replace(POLICY, deny_hosts=("api.example.com",)), "api.example.com")
    # Deny hosts win over the catalog too.
    catalog_policy = replace(
        POLICY, allow_hosts=(), allow_catalog_hosts=True, deny_hosts=("api.example.com",)
    )
    assert not host_allowed(catalog_policy, "api.example.com", listed=True)
    assert host_allowed(replace(catalog_policy, deny_hosts=()), "api.example.com", listed=True)
    assert not host_allowed(replace(catalog_policy, deny_hosts=()), "api.example.com", listed=False)


HOLDS: list[tuple[str, Policy, tuple[Rule, ...], Payment, Context]] = [
    (
        "rule",
        POLICY,
        (Rule("r_hold", 1, RuleScope.ORG, RuleKind.HOLD, host="*.example.com"),),
        PAYMENT,
        KNOWN,
    ),
    (
        "catalog_new_host",
        replace(POLICY, allow_hosts=(), allow_catalog_hosts=True),
        (),
        PAYMENT,
        Context(catalog=CatalogListing(frozenset({PAYEE})), pay_to_known=True),
    ),
    ("new_pay_to", POLICY, (), PAYMENT, Context(pay_to_known=False)),
    ("instruction_like_description", POLICY, (), replace(PAYMENT, instruction_like_description=True), KNOWN),
    ("threshold", replace(POLICY, step_up_threshold_usd=Decimal("0.01")), (), PAYMENT, KNOWN),
]


@pytest.mark.parametrize(
    ("reason", "policy", "rules", "payment", "context"), HOLDS, ids=[h[0] for h in HOLDS]
)
def test_each_hold_reason(
    reason: str, policy: Policy, rules: tuple[Rule, ...], payment: Payment, context: Context
) -> None:
    decision = evaluate(policy, rules, Usage(), payment, context)
    assert decision.outcome == "hold"
    assert decision.hold_reason == reason
    assert decision.reasons == ()
    assert decision.threshold_usd == (Decimal("0.01") if reason == "threshold" else None)


def test_the_hold_table_covers_every_hold_reason() -> None:
    assert [row[0] for row in HOLDS] == list(HOLD_ORDER)


def test_a_hold_has_one_reason_the_first_in_order() -> None:
    policy = replace(POLICY, allow_hosts=(), allow_catalog_hosts=True, step_up_threshold_usd=Decimal("0.01"))
    payment = replace(PAYMENT, instruction_like_description=True)
    listing = CatalogListing(frozenset())  # rotating payee: listed, nothing pinned
    everything = (policy, payment, Context(catalog=listing, pay_to_known=False))
    hold_rule = Rule("r_hold", 4, RuleScope.AGENT, RuleKind.HOLD)
    decision = evaluate(everything[0], (hold_rule,), Usage(), everything[1], everything[2])
    assert (decision.hold_reason, decision.rules, decision.rule_scopes) == (
        "rule",
        ("r_hold",),
        {"r_hold": "agent"},
    )
    assert (
        evaluate(everything[0], (), Usage(), everything[1], everything[2]).hold_reason == "catalog_new_host"
    )
    allowed_host = replace(policy, allow_hosts=("api.example.com",))
    assert evaluate(allowed_host, (), Usage(), payment, everything[2]).hold_reason == "new_pay_to"
    known = Context(catalog=listing, pay_to_known=True)
    assert evaluate(allowed_host, (), Usage(), payment, known).hold_reason == "instruction_like_description"
    plain = replace(payment, instruction_like_description=False)
    assert evaluate(allowed_host, (), Usage(), plain, known).hold_reason == "threshold"


def test_a_payee_pinned_by_the_catalog_for_the_host_is_not_new() -> None:
    pinned = Context(catalog=CatalogListing(frozenset({PAYEE.lower()})), pay_to_known=False)
    assert evaluate(POLICY, (), Usage(), PAYMENT, pinned).allowed
    other = Context(catalog=CatalogListing(frozenset({OTHER})), pay_to_known=False)
    assert evaluate(POLICY, (), Usage(), PAYMENT, other).hold_reason == "new_pay_to"


def test_rules_break_no_hold_into_an_allow_and_deny_beats_hold() -> None:
    hold = Rule("r_hold", 1, RuleScope.ORG, RuleKind.HOLD)
    deny = Rule("r_deny", 1, RuleScope.AGENT, RuleKind.DENY, path_prefix="/v1/")
    decision = evaluate(POLICY, (hold, deny), Usage(), PAYMENT, KNOWN)
    assert decision.outcome == "deny"
    assert decision.reasons == ("rule_denied",)
