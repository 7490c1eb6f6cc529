"""A policy change an agent asks for, as a value: what is read from the tool's `change` object,
its canonical document, every refusal with its reason and fields, whether each part gives more
room than the policy in force, and the policy an approval makes. Whatever a valid request makes
widens the policy by exactly the parts asked for, as the dashboard's own widening check sees it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.policy.model import Policy, Velocity
from server.policy.requested_changes import (
    ChangeReason,
    ChangeRequestError,
    parse_requested_change,
)
from server.policy.rules import Rule
from server.policy.service import widened
from server.vocabulary import RuleKind, RuleScope, RuleWindow

PAYEE = "0x" + "ab" * 20
POLICY = Policy(
    version=3,
    networks=("eip155:84532",),
    allow_hosts=("api.example.com", "*.data.example"),
    deny_hosts=("bad.example",),
    max_usd_per_tx=Decimal("1.00"),
    daily_cap_usd=Decimal("10.00"),
    step_up_threshold_usd=Decimal("0.50"),
    pay_to_deny=(PAYEE,),
    velocity=Velocity(max_tx=5, max_usd=Decimal("2.00")),
    verified_sellers_only=True,
)
RULES = {
    "rule_week": Rule(
        "rule_week", 2, RuleScope.AGENT, RuleKind.LIMIT, limit_atomic=50_000_000, window=RuleWindow.WEEK
    ),
    "rule_org": Rule("rule_org", 1, RuleScope.ORG, RuleKind.DENY, host="costly.example"),
}


def _refused(value: object) -> tuple[str, tuple[str, ...]]:
    with pytest.raises(ChangeRequestError) as refused:
        parse_requested_change(value)
    return str(refused.value.reason), refused.value.fields


def test_a_request_reads_into_one_canonical_document() -> None:
    change = parse_requested_change(
        {
            "addAllowHosts": ["NEW.Example.com", "*.more.example"],
            "removeDenyHosts": ["bad.example"],
            "addNetworks": ["eip155:8453"],
            "removePayToDeny": [PAYEE.upper().replace("0X", "0x")],
            "maxUsdPerTx": "2.5",
            "dailyCapUsd": 20,
            "stepUpThresholdUsd": "0.75",
            "velocityMaxTx": 10,
            "velocityMaxUsd": "4",
            "allowCatalogHosts": True,
            "allowUnverifiedSellers": True,
            "raiseRuleLimits": [{"ruleId": "rule_week", "limitUsd": "80"}],
            "removeRules": ["rule_org"],
            "removeStepUpThreshold": None,  # a null part is no part
        }
    )
    assert change.document() == {
        "addAllowHosts": ["*.more.example", "new.example.com"],
        "removeDenyHosts": ["bad.example"],
        "addNetworks": ["eip155:8453"],
        "removePayToDeny": [PAYEE],
        "maxUsdPerTx": "2.50",
        "dailyCapUsd": "20.00",
        "stepUpThresholdUsd": "0.75",
        "velocityMaxTx": 10,
        "velocityMaxUsd": "4.00",
        "allowCatalogHosts": True,
        "allowUnverifiedSellers": True,
        "raiseRuleLimits": [{"ruleId": "rule_week", "limitUsd": "80.00"}],
        "removeRules": ["rule_org"],
    }
    assert change.touches_policy
    assert change.rule_ids == ("rule_week", "rule_org")
    change.check_wider(POLICY, RULES)


def test_the_same_request_spelled_otherwise_reads_the_same() -> None:
    one = parse_requested_change({"addAllowHosts": ["b.example", "A.example"], "dailyCapUsd": "20"})
    two = parse_requested_change({"dailyCapUsd": 20.0, "addAllowHosts": ["a.example", "b.example."]})
    assert one.document() == two.document()


REFUSALS: list[tuple[object, str, tuple[str, ...]]] = [
    ("raise my cap", "not_an_object", ("change",)),
    ({}, "empty_change", ("change",)),
    ({"dailyCapUsd": None}, "empty_change", ("change",)),
    ({"allowHosts": ["*"], "dailyCapUsd": "20"}, "unknown_field", ("allowHosts",)),
    ({"addAllowHosts": "api.example.com"}, "invalid_list", ("addAllowHosts",)),
    ({"addAllowHosts": []}, "invalid_list", ("addAllowHosts",)),
    ({"addAllowHosts": [f"h{n}.example" for n in range(11)]}, "invalid_list", ("addAllowHosts",)),
    ({"addAllowHosts": ["a.example", "A.example"]}, "invalid_list", ("addAllowHosts",)),
    ({"addAllowHosts": ["*"]}, "invalid_host", ("addAllowHosts",)),
    ({"addAllowHosts": ["http://a.example/x"]}, "invalid_host", ("addAllowHosts",)),
    ({"removeDenyHosts": [7]}, "invalid_host", ("removeDenyHosts",)),
    ({"addNetworks": ["eip155:1"]}, "invalid_network", ("addNetworks",)),
    ({"removePayToDeny": ["0x12"]}, "invalid_pay_to", ("removePayToDeny",)),
    ({"dailyCapUsd": "two"}, "invalid_amount", ("dailyCapUsd",)),
    ({"maxUsdPerTx": "-1"}, "invalid_amount", ("maxUsdPerTx",)),
    ({"maxUsdPerTx": "0.0000001"}, "invalid_amount", ("maxUsdPerTx",)),
    ({"velocityMaxTx": 0}, "invalid_count", ("velocityMaxTx",)),
    ({"velocityMaxTx": True}, "invalid_count", ("velocityMaxTx",)),
    ({"velocityMaxTx": "5"}, "invalid_count", ("velocityMaxTx",)),
    ({"allowCatalogHosts": False}, "invalid_switch", ("allowCatalogHosts",)),
    ({"removeStepUpThreshold": "yes"}, "invalid_switch", ("removeStepUpThreshold",)),
    (
        {"stepUpThresholdUsd": "1", "removeStepUpThreshold": True},
        "conflicting_fields",
        ("stepUpThresholdUsd", "removeStepUpThreshold"),
    ),
    (
        {"raiseRuleLimits": [{"ruleId": "rule_a", "limitUsd": "5"}], "removeRules": ["rule_a"]},
        "conflicting_fields",
        ("raiseRuleLimits", "removeRules"),
    ),
    ({"removeRules": ["rule_a", "rule_a"]}, "conflicting_fields", ("raiseRuleLimits", "removeRules")),
    ({"raiseRuleLimits": [{"ruleId": "rule_a"}]}, "invalid_rule", ("raiseRuleLimits",)),
    ({"raiseRuleLimits": [{"ruleId": "r" * 41, "limitUsd": "5"}]}, "invalid_rule", ("raiseRuleLimits",)),
    ({"raiseRuleLimits": [{"ruleId": "rule_a", "limitUsd": "x"}]}, "invalid_amount", ("raiseRuleLimits",)),
    (
        {"raiseRuleLimits": [{"ruleId": "a", "limitUsd": "5"}, {"ruleId": "a", "limitUsd": "6"}]},
        "conflicting_fields",
        ("raiseRuleLimits",),
    ),
    ({"removeRules": ["rule\n"]}, "invalid_rule", ("removeRules",)),
]


@pytest.mark.parametrize(("value", "reason", "fields"), REFUSALS)
def test_a_change_that_cannot_be_read_is_refused_by_reason_and_field(
    value: object, reason: str, fields: tuple[str, ...]
) -> None:
    assert _refused(value) == (reason, fields)


NOT_WIDER: list[tuple[dict[str, Any], str, tuple[str, ...]]] = [
    ({"addAllowHosts": ["api.example.com"]}, "not_wider", ("addAllowHosts",)),
    ({"addAllowHosts": ["x.data.example"]}, "not_wider", ("addAllowHosts",)),  # the wildcard has it
    ({"removeDenyHosts": ["fine.example"]}, "not_wider", ("removeDenyHosts",)),
    ({"addNetworks": ["eip155:84532"]}, "not_wider", ("addNetworks",)),
    ({"removePayToDeny": ["0x" + "cd" * 20]}, "not_wider", ("removePayToDeny",)),
    ({"maxUsdPerTx": "1"}, "not_wider", ("maxUsdPerTx",)),
    ({"dailyCapUsd": "5", "maxUsdPerTx": "2"}, "not_wider", ("dailyCapUsd",)),
    ({"stepUpThresholdUsd": "0.25"}, "not_wider", ("stepUpThresholdUsd",)),
    ({"velocityMaxTx": 5}, "not_wider", ("velocityMaxTx",)),
    ({"velocityMaxUsd": "1"}, "not_wider", ("velocityMaxUsd",)),
    ({"raiseRuleLimits": [{"ruleId": "rule_week", "limitUsd": "50"}]}, "not_wider", ("raiseRuleLimits",)),
    (
        {"raiseRuleLimits": [{"ruleId": "rule_org", "limitUsd": "50"}]},
        "not_a_limit_rule",
        ("raiseRuleLimits",),
    ),
    ({"removeRules": ["rule_gone"]}, "unknown_rule", ("removeRules",)),
    ({"raiseRuleLimits": [{"ruleId": "rule_gone", "limitUsd": "5"}]}, "unknown_rule", ("raiseRuleLimits",)),
]


@pytest.mark.parametrize(("value", "reason", "fields"), NOT_WIDER)
def test_a_part_that_gives_no_more_room_is_refused(
    value: dict[str, Any], reason: str, fields: tuple[str, ...]
) -> None:
    change = parse_requested_change(value)
    with pytest.raises(ChangeRequestError) as refused:
        change.check_wider(POLICY, RULES)
    assert (str(refused.value.reason), refused.value.fields) == (reason, fields)


def test_limits_that_are_not_set_cannot_be_raised_and_switches_already_on_give_nothing() -> None:
    open_policy = Policy(version=1, networks=("eip155:84532",), allow_catalog_hosts=True)
    for value, field in [
        ({"stepUpThresholdUsd": "5"}, "stepUpThresholdUsd"),  # no threshold: every payment passes it
        ({"removeStepUpThreshold": True}, "removeStepUpThreshold"),
        ({"velocityMaxTx": 50}, "velocityMaxTx"),
        ({"velocityMaxUsd": "50"}, "velocityMaxUsd"),
        ({"allowCatalogHosts": True}, "allowCatalogHosts"),
        ({"allowUnverifiedSellers": True}, "allowUnverifiedSellers"),
    ]:
        with pytest.raises(ChangeRequestError) as refused:
            parse_requested_change(value).check_wider(open_policy, {})
        assert refused.value.reason == ChangeReason.NOT_WIDER
        assert refused.value.fields == (field,)


def test_an_approved_change_makes_exactly_the_policy_asked_for() -> None:
    change = parse_requested_change(
        {
            "addAllowHosts": ["new.example"],
            "removeDenyHosts": ["bad.example"],
            "addNetworks": ["eip155:8453"],
            "removePayToDeny": [PAYEE],
            "dailyCapUsd": "25",
            "removeStepUpThreshold": True,
            "velocityMaxUsd": "3",
            "allowUnverifiedSellers": True,
        }
    )
    after = change.policy_after(POLICY)
    assert after.allow_hosts == ("api.example.com", "*.data.example", "new.example")
    assert (after.deny_hosts, after.pay_to_deny) == ((), ())
    assert after.networks == ("eip155:84532", "eip155:8453")
    assert (after.max_usd_per_tx, after.daily_cap_usd) == (Decimal("1.00"), Decimal("25"))
    assert after.step_up_threshold_usd is None
    assert after.velocity == Velocity(max_tx=5, max_usd=Decimal("3"))
    assert (after.allow_catalog_hosts, after.verified_sellers_only) == (False, False)
    assert after.version == POLICY.version  # the version is the writer's to set
    rules_only = parse_requested_change({"removeRules": ["rule_org"]})
    assert not rules_only.touches_policy
    assert rules_only.policy_after(POLICY) == POLICY


PARTS = {
    "addAllowHosts": st.lists(
        st.sampled_from(["a.example", "b.example", "*.c.example"]), min_size=1, unique=True
    ),
    "removeDenyHosts": st.just(["bad.example"]),
    "addNetworks": st.just(["eip155:8453"]),
    "removePayToDeny": st.just([PAYEE]),
    "maxUsdPerTx": st.decimals(min_value=Decimal("1.01"), max_value=Decimal("100"), places=2),
    "dailyCapUsd": st.decimals(min_value=Decimal("10.01"), max_value=Decimal("1000"), places=2),
    "stepUpThresholdUsd": st.decimals(min_value=Decimal("0.51"), max_value=Decimal("9"), places=2),
    "velocityMaxTx": st.integers(min_value=6, max_value=1000),
    "velocityMaxUsd": st.decimals(min_value=Decimal("2.01"), max_value=Decimal("99"), places=2),
    "allowCatalogHosts": st.just(True),
    "allowUnverifiedSellers": st.just(True),
}
# The dashboard's name for what each part widens (server/policy/service.py, `widened`).
WIDENS = {
    "addAllowHosts": "allowHosts",
    "removeDenyHosts": "denyHosts",
    "addNetworks": "networks",
    "removePayToDeny": "payToDeny",
    "maxUsdPerTx": "maxUsdPerTx",
    "dailyCapUsd": "dailyCapUsd",
    "stepUpThresholdUsd": "stepUpThresholdUsd",
    "velocityMaxTx": "velocity",
    "velocityMaxUsd": "velocity",
    "allowCatalogHosts": "allowCatalogHosts",
    "allowUnverifiedSellers": "verifiedSellersOnly",
}


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(sorted(PARTS)), st.none(), min_size=1).flatmap(
        lambda names: st.fixed_dictionaries({name: PARTS[name] for name in names})
    )
)
def test_whatever_a_valid_request_makes_widens_exactly_what_it_asked(value: dict[str, Any]) -> None:
    change = parse_requested_change(
        {name: str(item) if isinstance(item, Decimal) else item for name, item in value.items()}
    )
    change.check_wider(POLICY, RULES)
    after = change.policy_after(POLICY)
    assert set(widened(POLICY, after)) == {WIDENS[name] for name in value}
    assert parse_requested_change(change.document()).document() == change.document()
