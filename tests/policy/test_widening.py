"""What counts as widening a policy (a change that waits for a passkey confirmation) and what
narrows it (applied at once), setting by setting."""

from __future__ import annotations

from decimal import Decimal

import pytest

from server.policy.model import ChallengeRules, Policy, Velocity
from server.policy.service import PolicySettings, apply_changes, changes_from_settings, widened

SEPOLIA, BASE = "eip155:84532", "eip155:8453"
PAYEE = "0x" + "ab" * 20
CURRENT = Policy(
    version=3,
    networks=(SEPOLIA,),
    allow_hosts=("a.example.com", "b.example.com"),
    deny_hosts=("bad.example.com",),
    step_up_threshold_usd=Decimal("0.50"),
    pay_to_deny=(PAYEE,),
    velocity=Velocity(max_tx=5, max_usd=Decimal("2.00"), window_seconds=120),
    challenge=ChallengeRules(hosts=("*.x.example.com",), path_prefixes=("/p/",), max_usd=Decimal("1.00")),
    verified_sellers_only=True,
)

WIDENING = [
    (PolicySettings(daily_cap_usd="10.01"), "dailyCapUsd"),
    (PolicySettings(max_usd_per_tx="1.01"), "maxUsdPerTx"),
    (PolicySettings(allow_hosts=["a.example.com", "c.example.com"]), "allowHosts"),
    (PolicySettings(clear_deny_hosts=True), "denyHosts"),
    (PolicySettings(step_up_threshold_usd="0.51"), "stepUpThresholdUsd"),
    (PolicySettings(step_up_threshold_usd="off"), "stepUpThresholdUsd"),
    (PolicySettings(networks=[SEPOLIA, BASE]), "networks"),
    (PolicySettings(clear_pay_to_deny=True), "payToDeny"),
    (PolicySettings(velocity_max_tx=6), "velocity"),
    (PolicySettings(velocity_max_usd="2.01"), "velocity"),
    (PolicySettings(velocity_window_seconds=60), "velocity"),
    (PolicySettings(challenge_hosts=["*.x.example.com", "y.example.com"]), "challenge"),
    (PolicySettings(challenge_path_prefixes=["/q/"]), "challenge"),
    (PolicySettings(challenge_max_usd="1.50"), "challenge"),
    (PolicySettings(allow_catalog_hosts=True), "allowCatalogHosts"),
    (PolicySettings(verified_sellers_only=False), "verifiedSellersOnly"),
]

NARROWING = [
    PolicySettings(daily_cap_usd="2.00", max_usd_per_tx="0.10"),
    PolicySettings(allow_hosts=["a.example.com"]),
    PolicySettings(clear_allow_hosts=True),
    PolicySettings(deny_hosts=["bad.example.com", "worse.example.com"]),
    PolicySettings(step_up_threshold_usd="0.10"),
    PolicySettings(pay_to_deny=[PAYEE, "0x" + "cd" * 20]),
    PolicySettings(velocity_max_tx=1, velocity_max_usd="0.50", velocity_window_seconds=600),
    PolicySettings(challenge_max_usd="0.20"),
]


@pytest.mark.parametrize(("settings", "field"), WIDENING, ids=[field for _, field in WIDENING])
def test_a_change_that_allows_more_widens(settings: PolicySettings, field: str) -> None:
    updated = apply_changes(CURRENT, changes_from_settings(CURRENT, settings))
    assert widened(CURRENT, updated) == [field]


@pytest.mark.parametrize("settings", NARROWING)
def test_a_change_that_allows_less_narrows(settings: PolicySettings) -> None:
    updated = apply_changes(CURRENT, changes_from_settings(CURRENT, settings))
    assert updated != CURRENT.with_changes(version=4)
    assert widened(CURRENT, updated) == []


def test_setting_a_limit_where_there_was_none_narrows() -> None:
    bare = Policy(version=1, networks=(SEPOLIA, BASE), allow_catalog_hosts=True)
    settings = PolicySettings(
        networks=[SEPOLIA],
        allow_catalog_hosts=False,
        verified_sellers_only=True,
        step_up_threshold_usd="0.30",
        velocity_max_tx=3,
        challenge_hosts=["a.example.com"],
        challenge_max_usd="1",
    )
    assert widened(bare, apply_changes(bare, changes_from_settings(bare, settings))) == []


def test_a_payee_that_is_not_an_address_is_refused_naming_the_setting() -> None:
    from server.policy.model import PolicyError

    with pytest.raises(PolicyError, match="pay-to-deny: 'bob' is not an address"):
        changes_from_settings(CURRENT, PolicySettings(pay_to_deny=["bob"]))
    twice = changes_from_settings(
        CURRENT, PolicySettings(pay_to_deny=[PAYEE, PAYEE.upper().replace("0X", "0x")])
    )
    assert twice.pay_to_deny == (PAYEE,)
