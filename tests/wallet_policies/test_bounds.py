"""The bounds of any one payment a policy allows, as a wallet can check them alone: the networks'
USDC, the tightest per-payment limit, and the payees, known only when the policy holds every
payable host to the catalog's pinned payees."""

from __future__ import annotations

from decimal import Decimal

import pytest

from server.policy.model import ChallengeRules, Policy, Velocity
from server.wallet_policies.bounds import MAX_ADDRESSES, payment_bounds

BASE_SEPOLIA = "eip155:84532"
BASE = "eip155:8453"
USDC = {
    BASE_SEPOLIA: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    BASE: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
}
A = "0x1111111111111111111111111111111111111111"
B = "0x2222222222222222222222222222222222222222"
C = "0x3333333333333333333333333333333333333333"
PINS = {
    "api.example.com": frozenset({A}),
    "data.example.com": frozenset({B}),
    "rotating.example.com": frozenset(),
}
POLICY = Policy(
    version=4,
    networks=(BASE_SEPOLIA,),
    allow_hosts=("api.example.com",),
    max_usd_per_tx=Decimal("0.10"),
    daily_cap_usd=Decimal("1.00"),
)


def _payees(policy: Policy, pins: dict[str, frozenset[str]] | None = None) -> tuple[str, ...] | None:
    return payment_bounds(policy, usdc_by_network=USDC, pins=PINS if pins is None else pins).payees


@pytest.mark.parametrize(
    ("changes", "payees"),
    [
        pytest.param({}, None, id="an-allowed-host-pays-any-payee-without-verified-sellers-only"),
        pytest.param({"verified_sellers_only": True}, (A,), id="verified-only-pins-the-listed-payee"),
        pytest.param(
            {"verified_sellers_only": True, "allow_hosts": ("*.example.com",)},
            None,
            id="a-wildcard-reaching-a-rotating-seller",
        ),
        pytest.param(
            {
                "verified_sellers_only": True,
                "allow_hosts": ("*.example.com",),
                "deny_hosts": ("rotating.example.com",),
            },
            (A, B),
            id="the-rotating-seller-denied",
        ),
        pytest.param(
            {"verified_sellers_only": True, "allow_hosts": ("unlisted.example.org",)},
            (),
            id="verified-only-and-no-listed-host-pays-nobody",
        ),
        pytest.param({"allow_hosts": ()}, (), id="no-allowed-host-pays-nobody"),
        pytest.param(
            {"allow_hosts": (), "allow_catalog_hosts": True},
            None,
            id="catalog-hosts-with-a-rotating-seller",
        ),
        pytest.param(
            {
                "allow_hosts": ("api.example.com",),
                "allow_catalog_hosts": True,
                "verified_sellers_only": True,
                "deny_hosts": ("rotating.example.com",),
            },
            (A, B),
            id="catalog-hosts-all-pinned",
        ),
        pytest.param(
            {
                "verified_sellers_only": True,
                "allow_hosts": ("*.example.com",),
                "deny_hosts": ("rotating.example.com",),
                "pay_to_deny": (B.upper().replace("0X", "0x"),),
            },
            (A,),
            id="a-denied-payee-is-left-out",
        ),
    ],
)
def test_the_payees_are_known_only_when_the_policy_holds_every_host_to_pinned_ones(
    changes: dict[str, object], payees: tuple[str, ...] | None
) -> None:
    assert _payees(POLICY.with_changes(**changes)) == payees


def test_more_pinned_payees_than_cdp_compares_are_not_bounded() -> None:
    many = {f"seller{n}.example.com": frozenset({f"0x{n:040x}"}) for n in range(MAX_ADDRESSES + 1)}
    policy = POLICY.with_changes(allow_hosts=("*.example.com",), verified_sellers_only=True)

    assert _payees(policy, many) is None
    assert len(_payees(policy, dict(list(many.items())[:MAX_ADDRESSES])) or ()) == MAX_ADDRESSES


@pytest.mark.parametrize(
    ("changes", "atomic"),
    [
        pytest.param({}, 100_000, id="the-per-payment-cap"),
        pytest.param(
            {"max_usd_per_tx": Decimal("5"), "daily_cap_usd": Decimal("2")}, 2_000_000, id="the-daily-cap"
        ),
        pytest.param({"velocity": Velocity(max_usd=Decimal("0.05"))}, 50_000, id="the-velocity-usd-limit"),
        pytest.param(
            {"challenge": ChallengeRules(max_usd=Decimal("0.03"))}, 30_000, id="the-challenge-maximum"
        ),
    ],
)
def test_the_value_is_the_tightest_limit_one_payment_meets(changes: dict[str, object], atomic: int) -> None:
    assert (
        payment_bounds(POLICY.with_changes(**changes), usdc_by_network=USDC, pins=PINS).max_value_atomic
        == atomic
    )


def test_the_verifying_contracts_are_the_networks_usdc_and_denied_payees_lower_case() -> None:
    bounds = payment_bounds(
        POLICY.with_changes(networks=(BASE, BASE_SEPOLIA), pay_to_deny=(C.upper().replace("0X", "0x"),)),
        usdc_by_network=USDC,
        pins=PINS,
    )

    assert bounds.verifying_contracts == tuple(sorted(address.lower() for address in USDC.values()))
    assert bounds.denied_payees == (C,)
    assert not bounds.pays_nobody
    unconfigured = payment_bounds(POLICY, usdc_by_network={}, pins=PINS)
    assert unconfigured.pays_nobody
