"""Where a request goes, judged before it goes (`judge_location`), and the paths on the way to a
402 (`via_paths`): deny and hold rules that select any of them apply to the payment; limits count
the path that asked for payment."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from server.policy.engine import Payment, Usage, evaluate, judge_location
from server.policy.model import ChallengeRules, Policy
from server.policy.rules import Rule

POLICY = Policy(
    version=7,
    networks=("eip155:84532",),
    allow_hosts=("api.example.com",),
    deny_hosts=("bad.api.example.com",),
    max_usd_per_tx=Decimal("1.00"),
    daily_cap_usd=Decimal("10.00"),
)
PAYMENT = Payment(
    host="api.example.com",
    path="/premium/report",
    network="eip155:84532",
    asset="USDC",
    pay_to="0x1111111111111111111111111111111111111111",
    amount_atomic=10_000,
)
DENY = Rule("r_deny", 2, "org", "deny", path_prefix="/premium/")  # type: ignore[arg-type]
HOLD = Rule("r_hold", 1, "team", "hold", path_prefix="/go/")  # type: ignore[arg-type]


def test_a_location_is_judged_by_everything_that_depends_only_on_where_it_is() -> None:
    assert judge_location(POLICY, (DENY,), host="api.example.com", path="/free").allowed
    denied = judge_location(POLICY, (DENY,), host="api.example.com", path="/premium/x")
    assert (denied.outcome, denied.reasons, denied.rules, dict(denied.rule_scopes)) == (
        "deny",
        ("rule_denied",),
        ("r_deny",),
        {"r_deny": "org"},
    )
    assert denied.versions == {"policy": 7, "rules": {"r_deny": 2}}
    assert judge_location(POLICY, (), host="bad.api.example.com", path="/").reasons == ("host_not_allowed",)
    assert judge_location(POLICY, (), host="other.example", path="/").reasons == ("host_not_allowed",)
    assert judge_location(POLICY, (), host="other.example", path="/", listed=True).reasons == (
        "host_not_allowed",
    )
    catalog = replace(POLICY, allow_catalog_hosts=True)
    assert judge_location(catalog, (), host="other.example", path="/", listed=True).allowed
    challenge = replace(POLICY, challenge=ChallengeRules(hosts=("api.example.com",), path_prefixes=("/v1/",)))
    assert judge_location(challenge, (), host="api.example.com", path="/v1/search").allowed
    assert judge_location(challenge, (DENY,), host="api.example.com", path="/premium/x").reasons == (
        "rule_denied",
        "challenge_path_not_allowed",
    )
    # Hold rules and limits are for payments, not for where a request may go.
    assert judge_location(POLICY, (HOLD,), host="api.example.com", path="/go/x").allowed


def test_rules_see_the_way_to_the_402_and_limits_count_where_it_came_from() -> None:
    via = replace(PAYMENT, path="/other", via_paths=("/premium/report",))
    assert evaluate(POLICY, (DENY,), Usage(), via).reasons == ("rule_denied",)
    held = evaluate(POLICY, (HOLD,), Usage(), replace(PAYMENT, via_paths=("/go/x",)))
    assert (held.outcome, held.rules) == ("hold", ("r_hold",))
    challenge = replace(POLICY, challenge=ChallengeRules(path_prefixes=("/premium/",)))
    assert (
        "challenge_path_not_allowed"
        in evaluate(challenge, (), Usage(), replace(PAYMENT, via_paths=("/go",))).reasons
    )
    limit = Rule("r_limit", 1, "agent", "limit", path_prefix="/go/", limit_atomic=0, window="day")  # type: ignore[arg-type]
    assert evaluate(POLICY, (limit,), Usage(), replace(PAYMENT, via_paths=("/go/x",))).outcome != "deny"


def test_a_hold_lists_every_reason_that_applies_in_order() -> None:
    policy = replace(POLICY, step_up_threshold_usd=Decimal("0.01"))
    decision = evaluate(
        policy, (HOLD,), Usage(), replace(PAYMENT, path="/go/x", instruction_like_description=True)
    )
    assert decision.hold_reasons == ("rule", "new_pay_to", "instruction_like_description", "threshold")
    assert decision.hold_reason == "rule"
    assert decision.threshold_usd == Decimal("0.01")
