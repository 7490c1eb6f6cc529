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
from server.wallet_policies.compiler import compile_account_policy, description_for, digest
from server.wallets.cdp import SentPolicy

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
            held = await accounts.update_policy(policy_id, compiled.document)
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


def describe_rule(rule: Mapping[str, Any]) -> str:
    """One rule in words: what it does to which operation, and for a typed-data rule, its bounds."""
    words = [f"{rule.get('action')} {rule.get('operation')}"]
    for criterion in rule.get("criteria") or ():
        kind = criterion.get("type")
        if kind == "evmTypedDataVerifyingContract":
            words.append(f"contract {criterion.get('operator')} {', '.join(criterion.get('addresses', []))}")
        elif kind == "evmTypedDataField":
            primary = (criterion.get("types") or {}).get("primaryType")
            words.append(f"typed data {primary}")
            for condition in criterion.get("conditions") or ():
                path, operator = condition.get("path"), condition.get("operator", "matches")
                if "addresses" in condition:
                    shown = condition["addresses"]
                    listed = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
                    words.append(f"{path} {operator} {listed}")
                elif "value" in condition:
                    words.append(f"{path} {operator} {_usdc(str(condition['value']))}")
                else:
                    words.append(f"{path} matches {condition.get('match')}")
        else:
            words.append(str(kind))
    return "; ".join(words)


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
                f"Rule {number}: CDP holds \u201c{describe_rule(theirs)}\u201d; "
                f"Paywarden compiles \u201c{describe_rule(mine)}\u201d."
            )
    for number, extra in enumerate(held[len(ours) :], start=len(ours) + 1):
        findings.append(f"Rule {number} is only at CDP: \u201c{describe_rule(extra)}\u201d.")
    for number, missing in enumerate(ours[len(held) :], start=len(held) + 1):
        findings.append(f"Rule {number} is missing at CDP: \u201c{describe_rule(missing)}\u201d.")
    return findings


async def check_drift(accounts: CdpAccounts, *, wallet: Wallet, compiled: Compiled) -> Drift:
    """What CDP holds for `wallet` now against `compiled`. Raises CdpError when CDP cannot say."""
    held = None if wallet.cdp_policy_id is None else await accounts.policy(wallet.cdp_policy_id)
    account = await accounts.account_at(wallet.address)
    attached = None if account is None else (wallet.cdp_policy_id in account.policies)
    return compare(held, attached=attached, compiled=compiled, policy_id=wallet.cdp_policy_id)
