"""An agent's payment bounds compiled into a CDP account policy (the Policy Engine's document).

Pure: bounds in, a document out, in the shape of cdp-sdk's `CreatePolicyOptions` (golden files in
tests/wallet_policies/golden/ are each validated against those types). CDP evaluates an account's
rules in order, the first matching rule decides, and a request no rule matches is refused, so:

1. when the payee is not bounded but some payees are denied: a `signEvmTypedData` reject rule for a
   `TransferWithAuthorization` to any of them;
2. one `signEvmTypedData` accept rule: the verifying contract is one of the networks' USDC, the
   typed data is an EIP-3009 `TransferWithAuthorization` (CDP matches the message's types to the
   criterion's before any condition), its `value` is at most the tightest per-payment limit, and its
   `to` one of the payees when they are known (server/wallet_policies/bounds.py);
3. a reject rule for every other operation an EVM server account can be asked for (hashes,
   messages, transactions, user operations). Typed data that matches no rule is refused by CDP's
   default.

An agent whose policy pays nobody (no network with USDC, a zero cap, no payee) gets no accept rule:
its wallet signs nothing.

A retired wallet (rotated away, kept until what is left in it is swept) gets a sweep-only policy
instead (`compile_sweep_policy`): its one accept rule is a `TransferWithAuthorization` of a
configured network's USDC to the agent's current wallet, of any value (a sweep moves the whole
balance); the agent's policy no longer applies to it, since it pays no seller any more.

cdp-sdk's policy types list operations of other products too. `EXCLUDED_OPERATIONS` names each,
with why no rule is written for it; a test fails when the SDK lists an operation that is in neither
list, so a new one is decided on, not missed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from server.wallet_policies.bounds import PaymentBounds
from server.x402.transfer_authorization import TRANSFER_WITH_AUTHORIZATION_TYPES

PRIMARY_TYPE = "TransferWithAuthorization"
# Criteria every request of the operation meets: value at least 0, any message at all.
_ANY_VALUE = {"type": "ethValue", "ethValue": "0", "operator": ">="}
_ANY_MESSAGE = {"type": "evmMessage", "match": "(?s).*"}

# Every other operation an EVM server account can be asked for: each refused, whatever it carries.
REJECTED_OPERATIONS: dict[str, list[dict[str, str]] | None] = {
    "signEvmHash": None,  # takes no criteria
    "signEvmMessage": [_ANY_MESSAGE],
    "signEvmTransaction": [_ANY_VALUE],
    "sendEvmTransaction": [_ANY_VALUE],
    "prepareUserOperation": [_ANY_VALUE],
    "sendUserOperation": [_ANY_VALUE],
}

_SOLANA = "Solana accounts: Paywarden makes only EVM accounts, so none exists to sign"
_END_USER = "end users' embedded wallets, which CDP governs with project policies only"
EXCLUDED_OPERATIONS: dict[str, str] = {
    "signSolTransaction": _SOLANA,
    "sendSolTransaction": _SOLANA,
    "signSolMessage": _SOLANA,
    "sendEndUserOperation": _END_USER,
    "signEndUserEvmTransaction": _END_USER,
    "sendEndUserEvmTransaction": _END_USER,
    "signEndUserEvmMessage": _END_USER,
    "signEndUserEvmTypedData": _END_USER,
    "signEndUserEvmHash": _END_USER,
    "signEndUserSolTransaction": _END_USER,
    "sendEndUserSolTransaction": _END_USER,
    "signEndUserSolMessage": _END_USER,
    "sendEndUserEvmAsset": _END_USER,
    "sendEndUserSolAsset": _END_USER,
    "createEndUserEvmSwap": _END_USER,
}


def _transfer_types() -> dict[str, Any]:
    return {
        "types": {PRIMARY_TYPE: TRANSFER_WITH_AUTHORIZATION_TYPES[PRIMARY_TYPE]},
        "primaryType": PRIMARY_TYPE,
    }


def _typed_data_rule(action: str, criteria: list[dict[str, Any]]) -> dict[str, Any]:
    return {"action": action, "operation": "signEvmTypedData", "criteria": criteria}


def _transfer_fields(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "evmTypedDataField", "types": _transfer_types(), "conditions": conditions}


def _accept_transfer(contracts: Sequence[str], conditions: list[dict[str, Any]]) -> dict[str, Any]:
    return _typed_data_rule(
        "accept",
        [
            {"type": "evmTypedDataVerifyingContract", "operator": "in", "addresses": list(contracts)},
            _transfer_fields(conditions),
        ],
    )


def _accept(bounds: PaymentBounds) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = [
        {"path": "value", "operator": "<=", "value": str(bounds.max_value_atomic)}
    ]
    if bounds.payees is not None:
        conditions.append({"path": "to", "operator": "in", "addresses": list(bounds.payees)})
    return _accept_transfer(bounds.verifying_contracts, conditions)


def _document(rules: list[dict[str, Any]], description: str) -> dict[str, Any]:
    for operation, criteria in REJECTED_OPERATIONS.items():
        rule: dict[str, Any] = {"action": "reject", "operation": operation}
        if criteria is not None:
            rule["criteria"] = [dict(criterion) for criterion in criteria]
        rules.append(rule)
    return {"scope": "account", "description": description, "rules": rules}


def compile_account_policy(bounds: PaymentBounds, *, description: str) -> dict[str, Any]:
    """The account policy for a wallet whose payments must stay within `bounds`."""
    rules: list[dict[str, Any]] = []
    if bounds.payees is None and bounds.denied_payees:
        denied = {"path": "to", "operator": "in", "addresses": list(bounds.denied_payees)}
        rules.append(_typed_data_rule("reject", [_transfer_fields([denied])]))
    if not bounds.pays_nobody:
        rules.append(_accept(bounds))
    return _document(rules, description)


def compile_sweep_policy(
    *, usdc_by_network: Mapping[str, str], payee: str, description: str
) -> dict[str, Any]:
    """The account policy of a retired wallet: it signs only a transfer of a configured network's
    USDC to `payee` (the agent's current wallet), its sweep; no network with USDC: nothing."""
    contracts = sorted({address.lower() for address in usdc_by_network.values()})
    rules: list[dict[str, Any]] = []
    if contracts:
        to = {"path": "to", "operator": "in", "addresses": [payee.lower()]}
        rules.append(_accept_transfer(contracts, [to]))
    return _document(rules, description)


def _short(agent_id: str) -> str:
    return agent_id.partition("_")[2][:20] or agent_id[:20]


def description_for(agent_id: str) -> str:
    """The policy's description at CDP (letters, digits, spaces, commas and periods, at most 50)."""
    return f"Paywarden policy for agent {_short(agent_id)}"


def sweep_description_for(agent_id: str) -> str:
    """A retired wallet's sweep-only policy's description at CDP (the same limits)."""
    return f"Paywarden sweep for agent {_short(agent_id)}"


def digest(document: dict[str, Any]) -> str:
    """SHA-256 of the document's canonical JSON: what a wallet row records CDP accepted."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
