"""An agent's wallet policy as it should be now, sending it to CDP, and checking what CDP holds.

`compiled_for` reads the agent's policy in force and the catalog's pinned payees and compiles the
document (server/wallet_policies/compiler.py). `send_policy` makes CDP hold it: the policy is
updated in place when the wallet already has one there (created again if someone deleted it), or
created, and the account is put under it if it is not. `check_drift` compares what CDP holds now
with what Paywarden compiles now.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from auth.principal import Principal
from server.catalog.service import listed_pins
from server.kit.money import format_usd
from server.models import Agent, Wallet
from server.policy.model import Policy
from server.signers.cdp_api import CdpAccounts, HeldPolicy
from server.signers.errors import CdpRefused
from server.tenancy.service import agent_with_policy
from server.wallet_policies.bounds import payment_bounds
from server.wallet_policies.compiler import (
    compile_account_policy,
    compile_sweep_policy,
    description_for,
    digest,
    sweep_description_for,
)
from server.wallets.service import SentPolicy

SYSTEM = Principal.system("wallet-policies")
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


@dataclass(frozen=True)
class Compiled:
    """The document a wallet's policy at CDP should be now, and what it was compiled from."""

    document: dict[str, Any]
    digest: str
    version: int  # the agent's policy version


def compile_policy(
    agent: Agent, policy: Policy, *, usdc_by_network: Mapping[str, str], pins: Mapping[str, frozenset[str]]
) -> Compiled:
    bounds = payment_bounds(policy, usdc_by_network=usdc_by_network, pins=pins)
    document = compile_account_policy(bounds, description=description_for(agent.id))
    return Compiled(document, digest(document), policy.version)


def compile_sweep(
    agent: Agent, policy: Policy, *, payee: str, usdc_by_network: Mapping[str, str]
) -> Compiled:
    """A retired wallet's sweep-only document: it may send USDC to `payee` (the agent's current
    wallet) and nothing else; `policy` only dates it (the agent's policy version it goes with)."""
    document = compile_sweep_policy(
        usdc_by_network=usdc_by_network, payee=payee, description=sweep_description_for(agent.id)
    )
    return Compiled(document, digest(document), policy.version)


def compiled_for(
    session: Session, principal: Principal, agent_id: str, *, usdc_by_network: Mapping[str, str]
) -> Compiled:
    """The agent's wallet policy compiled from its policy in force and the catalog as it is now."""
    agent, policy = agent_with_policy(session, principal, agent_id)
    return compile_policy(agent, policy, usdc_by_network=usdc_by_network, pins=listed_pins(session))


async def hold_policy(
    accounts: CdpAccounts, *, policy_id: str | None, compiled: Compiled, idempotency_key: str
) -> tuple[SentPolicy, bool]:
    """Make CDP hold `compiled`: the policy `policy_id` updated in place, or a new one (also when
    `policy_id` was deleted at CDP); (what it holds, whether it was created). `idempotency_key`
    names the wallet, so a creation repeated after a lost answer makes one policy, not two.
    Raises CdpError when CDP does not take it."""
    held: HeldPolicy | None = None
    if policy_id is not None:
        try:
            held = await accounts.replace_rules(policy_id, compiled.document)
        except CdpRefused as refused:
            if refused.extra.get("httpStatus") != 404:
                raise
    created = held is None
    if held is None:
        held = await accounts.create_policy(
            compiled.document, idempotency_key=f"{idempotency_key}:{compiled.digest}"
        )
    return SentPolicy(held.id, compiled.digest, compiled.version), created


async def send_policy(
    accounts: CdpAccounts, *, address: str, policy_id: str | None, compiled: Compiled, idempotency_key: str
) -> tuple[SentPolicy, bool]:
    """`hold_policy`, and the account at `address` put under the policy if it is not."""
    sent, created = await hold_policy(
        accounts, policy_id=policy_id, compiled=compiled, idempotency_key=idempotency_key
    )
    account = await accounts.account_at(address)
    if account is None or sent.policy_id not in account.policies:
        await accounts.attach_policy(address, sent.policy_id)
    return sent, created


# -- drift -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drift:
    """What CDP holds for a wallet compared with what Paywarden compiles now."""

    policy_id: str | None
    version: int  # the agent's policy version compiled now
    findings: tuple[str, ...]  # one sentence per difference; none when CDP holds what is compiled

    @property
    def in_step(self) -> bool:
        return not self.findings


def _lower(value: Any) -> Any:
    """Addresses compare whatever their case (CDP may answer them checksummed)."""
    if isinstance(value, str) and _ADDRESS.match(value):
        return value.lower()
    if isinstance(value, list | tuple):
        return [_lower(item) for item in value]
    if isinstance(value, dict):
        return {key: _lower(item) for key, item in value.items()}
    return value


def _usdc(atomic: str) -> str:
    return f"{format_usd(int(atomic), atomic=True)} USDC" if atomic.isdigit() else atomic


# What each operation is, in words, and the criteria that hold for every request of it.
_OPERATIONS = {
    "signEvmHash": "hash",
    "signEvmMessage": "message",
    "signEvmTransaction": "transaction",
    "sendEvmTransaction": "transaction to send",
    "prepareUserOperation": "user operation to prepare",
    "sendUserOperation": "user operation to send",
}
_EVERY: tuple[list[dict[str, str]], ...] = (
    [],
    [{"type": "ethValue", "ethValue": "0", "operator": ">="}],
    [{"type": "evmMessage", "match": "(?s).*"}],
)


def _addresses(operator: str, addresses: Sequence[str], *, one: str, many: str) -> str:
    listed = ", ".join(addresses)
    if operator == "not in":
        return f"{one} other than {listed}" if addresses else f"any {one}"
    return f"{one} {listed}" if len(addresses) == 1 else f"one of {len(addresses)} {many} ({listed})"


def _typed_data_words(criteria: Sequence[Mapping[str, Any]]) -> list[str]:
    words: list[str] = []
    bounded_payee = False
    for criterion in criteria:
        if criterion.get("type") == "evmTypedDataVerifyingContract":
            operator, addresses = criterion.get("operator", "in"), criterion.get("addresses", [])
            words.append("of " + _addresses(operator, addresses, one="the token", many="tokens"))
        elif criterion.get("type") == "evmTypedDataField":
            words.insert(0, str((criterion.get("types") or {}).get("primaryType", "typed data")))
            for condition in criterion.get("conditions") or ():
                path, operator = condition.get("path"), condition.get("operator", "")
                if "addresses" in condition and path == "to":
                    bounded_payee = True
                    words.append(
                        "to " + _addresses(operator, condition["addresses"], one="payee", many="payees")
                    )
                elif "value" in condition and path == "value" and operator == "<=":
                    words.append(f"of at most {_usdc(str(condition['value']))}")
                elif "value" in condition:
                    words.append(f"with {path} {operator} {condition['value']}")
                elif "addresses" in condition:
                    words.append(f"with {path} {operator} {', '.join(condition['addresses'])}")
                else:
                    words.append(f"with {path} matching {condition.get('match')}")
        else:
            words.append(f"when {criterion.get('type')} holds")
    if words and not bounded_payee:
        words.append("to any payee")
    return words


def rule_in_words(rule: Mapping[str, Any]) -> str:
    """A rule as a person reads it: what CDP does with which requests."""
    verb = "signs" if rule.get("action") == "accept" else "refuses"
    operation = str(rule.get("operation"))
    criteria = list(rule.get("criteria") or [])
    if operation == "signEvmTypedData":
        primary, *bounds = _typed_data_words(criteria) or ["any typed data"]
        return f"{verb} {primary}" + (" " + ", ".join(bounds) if bounds else "")
    what = _OPERATIONS.get(operation, operation)
    if criteria in _EVERY:
        return f"{verb} every {what}"
    return f"{verb} a {what} when {', '.join(str(c.get('type')) for c in criteria)} holds"


def compare(
    held: HeldPolicy | None, *, attached: bool | None, compiled: Compiled, policy_id: str | None
) -> Drift:
    """The differences between what CDP holds (`held`; `attached`: whether the account is under it,
    None when CDP has no such account) and what Paywarden compiles now."""
    findings: list[str] = []
    if policy_id is None:
        findings.append("Paywarden has not recorded a policy at CDP for this wallet yet.")
    elif held is None:
        findings.append(f"CDP holds no policy {policy_id}: it was deleted there.")
    if attached is None:
        findings.append("CDP has no account at this wallet's address.")
    elif attached is False and held is not None:
        findings.append("The account at CDP is not under Paywarden's policy, so CDP does not apply it.")
    if held is not None:
        if held.status != "active":
            findings.append(f"The policy is {held.status} at CDP, so CDP does not apply it.")
        if held.scope != "account":
            findings.append(f"The policy's scope at CDP is {held.scope}, not account.")
        findings += _rule_findings(list(held.rules), compiled.document["rules"])
    return Drift(policy_id=policy_id, version=compiled.version, findings=tuple(findings))


def _rule_findings(held: Sequence[Mapping[str, Any]], ours: Sequence[Mapping[str, Any]]) -> list[str]:
    findings: list[str] = []
    if len(held) != len(ours):
        findings.append(f"CDP holds {len(held)} rules; Paywarden compiles {len(ours)}.")
    for number, (theirs, mine) in enumerate(zip(held, ours, strict=False), start=1):
        if _lower(theirs) != _lower(mine):
            findings.append(
                f"Rule {number}: at CDP it {rule_in_words(theirs)}; compiled from the agent's policy, "
                f"it {rule_in_words(mine)}."
            )
    for number, extra in enumerate(held[len(ours) :], start=len(ours) + 1):
        findings.append(f"Rule {number} is only at CDP: it {rule_in_words(extra)}.")
    for number, missing in enumerate(ours[len(held) :], start=len(held) + 1):
        findings.append(f"Rule {number} is missing at CDP: it {rule_in_words(missing)}.")
    return findings


async def check_drift(accounts: CdpAccounts, *, wallet: Wallet, compiled: Compiled) -> Drift:
    """What CDP holds for `wallet` now against `compiled`. Raises CdpError when CDP cannot say."""
    held = None if wallet.cdp_policy_id is None else await accounts.policy(wallet.cdp_policy_id)
    account = await accounts.account_at(wallet.address)
    attached = None if account is None else (wallet.cdp_policy_id in account.policies)
    return compare(held, attached=attached, compiled=compiled, policy_id=wallet.cdp_policy_id)
