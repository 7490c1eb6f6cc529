"""The policy's host patterns and the engine's foundation rules, as pure functions."""

from __future__ import annotations

from decimal import Decimal

import pytest

from server.policy.engine import Context, Payment, Usage, evaluate, host_allowed
from server.policy.hosts import HostPatternError, host_matches, normalize_pattern
from server.policy.model import Policy

SEPOLIA = "eip155:84532"
# The organisation has paid this payee before, so no first-payment hold gets in the way.
KNOWN_PAYEE = Context(pay_to_known=True)


@pytest.mark.parametrize(
    ("pattern", "host", "matches"),
    [
        ("api.example.com", "api.example.com", True),
        ("api.example.com", "x.api.example.com", False),
        ("*.example.com", "data.example.com", True),
        ("*.example.com", "a.b.example.com", True),
        ("*.example.com", "example.com", False),
        ("*.example.com", "badexample.com", False),
        ("*.example.com", "example.com.evil.io", False),
    ],
)
def test_host_patterns(pattern: str, host: str, matches: bool) -> None:
    assert host_matches(normalize_pattern(pattern), host) is matches


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("API.Example.COM.", "api.example.com"),
        ("*.Example.com", "*.example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
    ],
)
def test_patterns_are_normalised(given: str, normal: str) -> None:
    assert normalize_pattern(given) == normal


@pytest.mark.parametrize(
    "bad", ["", "*", "*.com", "a..b", "-a.com", "a b.com", "*.*.example.com", "http://x.com"]
)
def test_invalid_patterns_are_refused(bad: str) -> None:
    with pytest.raises(HostPatternError):
        normalize_pattern(bad)


def policy(**changes: object) -> Policy:
    base = Policy(
        version=3,
        networks=(SEPOLIA,),
        allow_hosts=("api.example.com",),
        max_usd_per_tx=Decimal("0.10"),
        daily_cap_usd=Decimal("1.00"),
    )
    return base.with_changes(**changes)


def payment(**changes: object) -> Payment:
    values: dict[str, object] = {
        "host": "api.example.com",
        "path": "/v1/x",
        "network": SEPOLIA,
        "asset": "USDC",
        "pay_to": "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
        "amount_atomic": 10_000,
    }
    values.update(changes)
    return Payment(**values)  # type: ignore[arg-type]


def test_an_empty_allow_list_allows_nothing_and_deny_wins() -> None:
    assert not host_allowed(policy(allow_hosts=()), "api.example.com")
    assert not host_allowed(
        policy(allow_hosts=("*.example.com",), deny_hosts=("api.example.com",)), "api.example.com"
    )
    assert host_allowed(
        policy(allow_hosts=("*.example.com",), deny_hosts=("api.example.com",)), "b.example.com"
    )


@pytest.mark.parametrize(
    ("pay", "usage", "reason"),
    [
        (payment(host="other.com"), Usage(), "host_not_allowed"),
        (payment(network="eip155:8453"), Usage(), "network_not_allowed"),
        (payment(asset=None), Usage(), "asset_not_allowed"),
        (payment(amount_atomic=100_001), Usage(), "amount_exceeds_per_transaction"),
        (payment(amount_atomic=10_000), Usage(spent_today_atomic=990_001), "daily_cap_exceeded"),
        (payment(amount_atomic=None), Usage(), "invalid_amount"),
        (payment(resource_host="evil.com"), Usage(), "resource_host_mismatch"),
    ],
)
def test_each_foundation_rule_denies_with_its_code(pay: Payment, usage: Usage, reason: str) -> None:
    decision = evaluate(policy(), (), usage, pay, KNOWN_PAYEE)
    assert decision.outcome == "deny"
    assert reason in decision.reasons
    assert decision.policy_version == 3


def test_a_payment_exactly_at_the_caps_is_allowed() -> None:
    decision = evaluate(
        policy(), (), Usage(spent_today_atomic=900_000), payment(amount_atomic=100_000), KNOWN_PAYEE
    )
    assert decision.outcome == "allow"
    assert decision.reasons == ()


def test_a_denial_lists_every_failing_rule() -> None:
    decision = evaluate(
        policy(), (), Usage(), payment(host="other.com", network="eip155:8453", amount_atomic=2_000_000)
    )
    assert set(decision.reasons) >= {
        "host_not_allowed",
        "network_not_allowed",
        "amount_exceeds_per_transaction",
        "daily_cap_exceeded",
    }


def test_the_document_round_trips() -> None:
    original = policy(step_up_threshold_usd=Decimal("0.05"), deny_hosts=("bad.example.com",))
    assert Policy.from_document(original.version, original.to_document()) == original
