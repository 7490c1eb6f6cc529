"""The policy engine: pure functions from (policy, payment, usage) to a decision. No I/O.

A payment is allowed only when every rule passes; a denial lists every rule that failed, in the
order a payment meets them. Holds for a human are considered only after every rule passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from server.kit.money import atomic_to_usd
from server.policy.hosts import host_matches_any
from server.policy.model import Policy

Outcome = Literal["allow", "deny", "hold"]


@dataclass(frozen=True)
class Payment:
    """What the seller asked for, as far as the policy cares."""

    host: str
    path: str
    network: str
    asset: str | None  # "USDC" when the asset is the configured USDC of the network
    pay_to: str
    amount_atomic: int | None  # None when the challenge's amount could not be read
    resource_host: str | None = None  # host of the resource the challenge names
    instruction_like_description: bool = False  # the 402's text reads like orders to the agent


@dataclass(frozen=True)
class Usage:
    """What the agent already spent, counted by the ledger at decision time."""

    spent_today_atomic: int = 0
    window_tx_count: int = 0
    window_spent_atomic: int = 0


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reasons: tuple[str, ...]
    policy_version: int
    hold_reason: str | None = None
    threshold_usd: Decimal | None = None

    @property
    def allowed(self) -> bool:
        return self.outcome == "allow"


def host_allowed(policy: Policy, host: str) -> bool:
    """Allowed hosts, with deny hosts winning; an empty allow list allows nothing."""
    return host_matches_any(policy.allow_hosts, host) and not host_matches_any(policy.deny_hosts, host)


def denial_reasons(policy: Policy, payment: Payment, usage: Usage) -> tuple[str, ...]:
    reasons: list[str] = []
    if not host_allowed(policy, payment.host):
        reasons.append("host_not_allowed")
    if payment.resource_host is not None and payment.resource_host != payment.host:
        reasons.append("resource_host_mismatch")
    if payment.network not in policy.networks:
        reasons.append("network_not_allowed")
    if payment.asset is None or payment.asset not in policy.assets:
        reasons.append("asset_not_allowed")
    if payment.pay_to.lower() in {addr.lower() for addr in policy.pay_to_deny}:
        reasons.append("pay_to_denied")

    amount = payment.amount_atomic
    if amount is None or amount <= 0:
        reasons.append("invalid_amount")
        return tuple(reasons)
    usd = atomic_to_usd(amount)
    if usd > policy.max_usd_per_tx:
        reasons.append("amount_exceeds_per_transaction")
    if atomic_to_usd(usage.spent_today_atomic + amount) > policy.daily_cap_usd:
        reasons.append("daily_cap_exceeded")
    velocity = policy.velocity
    if velocity.max_tx is not None and usage.window_tx_count + 1 > velocity.max_tx:
        reasons.append("velocity_tx_exceeded")
    if velocity.max_usd is not None and atomic_to_usd(usage.window_spent_atomic + amount) > velocity.max_usd:
        reasons.append("velocity_usd_exceeded")
    challenge = policy.challenge
    if challenge.hosts and not host_matches_any(challenge.hosts, payment.host):
        reasons.append("challenge_host_not_allowed")
    if challenge.path_prefixes and not any(payment.path.startswith(p) for p in challenge.path_prefixes):
        reasons.append("challenge_path_not_allowed")
    if challenge.max_usd is not None and usd > challenge.max_usd:
        reasons.append("challenge_amount_exceeded")
    return tuple(reasons)


def evaluate(policy: Policy, payment: Payment, usage: Usage) -> Decision:
    reasons = denial_reasons(policy, payment, usage)
    if reasons:
        return Decision("deny", reasons, policy.version)
    assert payment.amount_atomic is not None
    if payment.instruction_like_description:
        return Decision("hold", (), policy.version, hold_reason="instruction_like_description")
    threshold = policy.step_up_threshold_usd
    if threshold is not None and atomic_to_usd(payment.amount_atomic) >= threshold:
        return Decision("hold", (), policy.version, hold_reason="threshold", threshold_usd=threshold)
    return Decision("allow", (), policy.version)
