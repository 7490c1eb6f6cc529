"""A person's policy settings merged into the current policy: what is left out stays, lists are
replaced, and a bad setting is refused naming it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from server.policy.model import ChallengeRules, Policy, PolicyError, Velocity
from server.policy.service import KEEP, PolicyChanges, PolicySettings, apply_changes, changes_from_settings

SEPOLIA = "eip155:84532"
CURRENT = Policy(
    version=3,
    networks=(SEPOLIA,),
    allow_hosts=("a.example.com",),
    deny_hosts=("bad.example.com",),
    step_up_threshold_usd=Decimal("0.50"),
    velocity=Velocity(max_tx=5, max_usd=Decimal("2.00"), window_seconds=120),
    challenge=ChallengeRules(hosts=("*.x.example.com",), path_prefixes=("/p/",), max_usd=Decimal("1.00")),
)


def test_no_setting_changes_nothing_but_the_version() -> None:
    changes = changes_from_settings(CURRENT, PolicySettings())
    assert changes == PolicyChanges()
    assert apply_changes(CURRENT, changes) == CURRENT.with_changes(version=4)


def test_velocity_and_challenge_settings_keep_the_values_left_out() -> None:
    changes = changes_from_settings(
        CURRENT, PolicySettings(velocity_max_usd="3", challenge_path_prefixes=["/q/", "/r/"])
    )
    assert changes.velocity == Velocity(max_tx=5, max_usd=Decimal("3"), window_seconds=120)
    assert changes.challenge == ChallengeRules(
        hosts=("*.x.example.com",), path_prefixes=("/q/", "/r/"), max_usd=Decimal("1.00")
    )
    window = changes_from_settings(CURRENT, PolicySettings(velocity_window_seconds=30, velocity_max_tx=1))
    assert window.velocity == Velocity(max_tx=1, max_usd=Decimal("2.00"), window_seconds=30)


def test_lists_are_replaced_and_hosts_normalised() -> None:
    changes = changes_from_settings(
        CURRENT, PolicySettings(allow_hosts=["API.Example.com", "*.Data.example.com"], networks=[SEPOLIA])
    )
    assert changes.allow_hosts == ("api.example.com", "*.data.example.com")
    assert changes.networks == (SEPOLIA,)
    assert changes.deny_hosts is None
    assert changes_from_settings(CURRENT, PolicySettings(clear_allow_hosts=True)).allow_hosts == ()


@pytest.mark.parametrize(
    ("given", "expected"), [(None, KEEP), ("off", None), ("0.7", Decimal("0.7"))], ids=["kept", "off", "set"]
)
def test_the_step_up_threshold_is_kept_removed_or_set(given: str | None, expected: object) -> None:
    changes = changes_from_settings(CURRENT, PolicySettings(step_up_threshold_usd=given))
    assert changes.step_up_threshold_usd == expected
    updated = apply_changes(CURRENT, changes)
    assert updated.step_up_threshold_usd == (CURRENT.step_up_threshold_usd if expected is KEEP else expected)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        (PolicySettings(daily_cap_usd="-1"), "daily-cap"),
        (PolicySettings(max_usd_per_tx="lots"), "max-per-tx"),
        (PolicySettings(allow_hosts=["*"]), "allow-host"),
        (PolicySettings(challenge_hosts=["a b"]), "challenge-host"),
        (PolicySettings(step_up_threshold_usd="-2"), "step-up"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(settings: PolicySettings, named: str) -> None:
    with pytest.raises(PolicyError, match=f"^{named}: "):
        changes_from_settings(CURRENT, settings)
