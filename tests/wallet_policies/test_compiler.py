"""Compiled CDP account policies, as golden files: each scenario's document is compared with its
file in `golden/`, byte for byte, and validated against cdp-sdk's own policy types, both the SDK's
options and the request it sends (so CDP would be asked exactly this). A golden file that does not
exist yet is written and the test fails, to be read and committed.

The compiler is pure: a policy and the catalog's facts in, a document out, the same every time."""

from __future__ import annotations

import json
import typing
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cdp.openapi_client.models.create_policy_request import CreatePolicyRequest
from cdp.policies.request_transformer import map_request_rules_to_openapi_format
from cdp.policies.types import CreatePolicyOptions, Rule

from server.policy.model import ChallengeRules, Policy
from server.wallet_policies.bounds import payment_bounds
from server.wallet_policies.compiler import (
    EXCLUDED_OPERATIONS,
    REJECTED_OPERATIONS,
    compile_account_policy,
    compile_sweep_policy,
    description_for,
    digest,
    sweep_description_for,
)
from server.x402.transfer_authorization import TRANSFER_WITH_AUTHORIZATION_TYPES

GOLDEN = Path(__file__).parent / "golden"
BASE_SEPOLIA = "eip155:84532"
BASE = "eip155:8453"
USDC = {
    BASE_SEPOLIA: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    BASE: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
}
AGENT = "agt_0123456789abcdef0123"
SELLER = "0x209693bc6afc0c5328ba36faf03c514ef312287c"
SELLER_TWO = "0x5555555555555555555555555555555555555555"
DENIED = "0x6666666666666666666666666666666666666666"
PINS = {
    "api.example.com": frozenset({SELLER}),
    "reports.example.com": frozenset({SELLER_TWO}),
    "rotating.example.net": frozenset(),
}
POLICY = Policy(
    version=7,
    networks=(BASE_SEPOLIA,),
    allow_hosts=("api.example.com",),
    max_usd_per_tx=Decimal("0.10"),
    daily_cap_usd=Decimal("1.00"),
)

SCENARIOS: dict[str, Policy] = {
    # Verified sellers only: every host it may pay pins its payees, so `to` is pinned too.
    "pinned-payees": POLICY.with_changes(
        allow_hosts=("api.example.com", "reports.example.com"), verified_sellers_only=True
    ),
    # An allowed host may name any payee: `to` is not bounded, the denied payee is refused first.
    "any-payee-but-the-denied": POLICY.with_changes(pay_to_deny=(DENIED,)),
    # A new agent's policy allows no host: nothing is accepted, everything refused.
    "pays-nobody": POLICY.with_changes(allow_hosts=()),
    # Two networks (two USDC contracts); the challenge rules' maximum is the tightest limit.
    "two-networks-tightest-limit": POLICY.with_changes(
        networks=(BASE, BASE_SEPOLIA),
        max_usd_per_tx=Decimal("5.00"),
        daily_cap_usd=Decimal("2.00"),
        challenge=ChallengeRules(max_usd=Decimal("1.50")),
    ),
    # Catalog hosts, one of which rotates its address: `to` cannot be pinned.
    "catalog-hosts-one-rotating": POLICY.with_changes(allow_hosts=(), allow_catalog_hosts=True),
}


CURRENT_WALLET = "0x7777777777777777777777777777777777777777"

# A retired wallet's sweep-only policies, by the networks configured with USDC.
SWEEPS: dict[str, dict[str, str]] = {
    # One network: the retired wallet may send that USDC to the agent's current wallet, nothing else.
    "sweep-only-to-the-current-wallet": {BASE_SEPOLIA: USDC[BASE_SEPOLIA]},
    # Two networks: either network's USDC, still only to the current wallet.
    "sweep-only-two-networks": USDC,
    # No network with USDC: the retired wallet signs nothing at all.
    "sweep-only-no-network": {},
}


def _compiled(policy: Policy) -> dict[str, Any]:
    bounds = payment_bounds(policy, usdc_by_network=USDC, pins=PINS)
    return compile_account_policy(bounds, description=description_for(AGENT))


def _sweep(usdc_by_network: dict[str, str]) -> dict[str, Any]:
    return compile_sweep_policy(
        usdc_by_network=usdc_by_network, payee=CURRENT_WALLET, description=sweep_description_for(AGENT)
    )


def _golden(name: str) -> dict[str, Any]:
    return _sweep(SWEEPS[name]) if name in SWEEPS else _compiled(SCENARIOS[name])


def _text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("name", sorted(SCENARIOS) + sorted(SWEEPS))
def test_the_compiled_policy_is_its_golden_file(name: str) -> None:
    document = _golden(name)
    path = GOLDEN / f"{name}.json"
    if not path.exists():
        path.write_text(_text(document))
        pytest.fail(f"{path} did not exist and was written: read it, and commit it if it is right")

    assert _text(document) == path.read_text()


@pytest.mark.parametrize("name", sorted(SCENARIOS) + sorted(SWEEPS))
def test_every_golden_file_is_a_policy_cdp_sdk_accepts_and_sends_unchanged(name: str) -> None:
    document = json.loads((GOLDEN / f"{name}.json").read_text())

    options = CreatePolicyOptions.model_validate(document)
    # What the SDK would send CDP, read back with CDP's own request model.
    wire = CreatePolicyRequest(
        scope=options.scope,
        description=options.description,
        rules=map_request_rules_to_openapi_format(options.rules),
    ).to_dict()
    assert CreatePolicyRequest.from_dict(wire) is not None
    assert options.model_dump(mode="json", exclude_none=True) == document
    assert json.loads(json.dumps(wire["rules"])) == document["rules"]


def test_the_accept_rule_pins_contract_type_value_and_payees() -> None:
    (accept,) = [r for r in _compiled(SCENARIOS["pinned-payees"])["rules"] if r["action"] == "accept"]

    contract, fields = accept["criteria"]
    assert accept["operation"] == "signEvmTypedData"
    assert contract == {
        "type": "evmTypedDataVerifyingContract",
        "operator": "in",
        "addresses": [USDC[BASE_SEPOLIA].lower()],
    }
    assert fields["types"] == {
        "primaryType": "TransferWithAuthorization",
        "types": {
            "TransferWithAuthorization": TRANSFER_WITH_AUTHORIZATION_TYPES["TransferWithAuthorization"]
        },
    }
    assert fields["conditions"] == [
        {"path": "value", "operator": "<=", "value": "100000"},
        {"path": "to", "operator": "in", "addresses": sorted([SELLER, SELLER_TWO])},
    ]


def test_every_operation_the_sdk_lists_is_refused_or_excluded_with_a_reason() -> None:
    listed = {typing.get_args(rule.model_fields["operation"].annotation)[0] for rule in typing.get_args(Rule)}
    written = {rule["operation"] for rule in _compiled(POLICY)["rules"]}

    assert written == set(REJECTED_OPERATIONS) | {"signEvmTypedData"}
    assert listed == written | set(EXCLUDED_OPERATIONS)
    assert not written & set(EXCLUDED_OPERATIONS)
    assert all(reason for reason in EXCLUDED_OPERATIONS.values())


def test_it_is_pure_and_the_digest_follows_the_document() -> None:
    first, again = _compiled(POLICY), _compiled(POLICY)
    lower = _compiled(POLICY.with_changes(max_usd_per_tx=Decimal("0.05")))

    assert first == again
    assert digest(first) == digest(again)
    assert digest(lower) != digest(first)
    assert len(description_for(AGENT)) <= 50


def test_a_sweep_policy_accepts_only_usdc_to_the_current_wallet_and_refuses_the_rest() -> None:
    document = _sweep(USDC)

    (accept,) = [rule for rule in document["rules"] if rule["action"] == "accept"]
    contract, fields = accept["criteria"]
    assert accept["operation"] == "signEvmTypedData"
    assert contract["addresses"] == sorted(address.lower() for address in USDC.values())
    assert fields["types"]["primaryType"] == "TransferWithAuthorization"
    # Any value (the whole balance moves), and one payee only.
    assert fields["conditions"] == [{"path": "to", "operator": "in", "addresses": [CURRENT_WALLET]}]
    assert [rule["operation"] for rule in document["rules"] if rule["action"] == "reject"] == list(
        REJECTED_OPERATIONS
    )
    assert document["description"] != _compiled(POLICY)["description"]
    assert len(sweep_description_for(AGENT)) <= 50
    # Another current wallet (a second rotation) is another document.
    moved = compile_sweep_policy(usdc_by_network=USDC, payee=SELLER, description=sweep_description_for(AGENT))
    assert digest(moved) != digest(document)
