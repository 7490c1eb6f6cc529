"""Choose the one offer Paywarden can pay: `exact` USDC on a supported network, a whole amount.

When several offers are payable, one on the agent's own networks wins, then the cheapest. When
none is, the reason names how far the closest offer got, so the agent
can say what the seller would have to change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from server.kit.money import AmountError, parse_atomic
from server.x402.challenge import Challenge, Offer

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")

# EIP-712 domains of the real USDC contracts, for sellers that leave `extra` out.
KNOWN_DOMAINS: dict[str, tuple[str, str]] = {
    "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913": ("USD Coin", "2"),
    "0x036cbd53842c5426634e7929541ec2318f3dcf7e": ("USDC", "2"),
}

# Ordered: an offer that fails a later check got closer to being payable.
REASONS = (
    "no_offers",
    "unsupported_scheme",
    "unsupported_network",
    "unsupported_asset",
    "amount_not_whole",
    "invalid_pay_to",
    "missing_eip712_domain",
)


class NoPayableEntry(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Selection:
    offer: Offer
    network: str
    asset: str
    pay_to: str
    amount_atomic: int
    domain_name: str
    domain_version: str
    max_timeout_seconds: int | None

    @property
    def chain_id(self) -> int:
        return int(self.network.split(":", 1)[1])


def assess(offer: Offer, usdc_by_network: Mapping[str, str]) -> Selection | str:
    """The payment Paywarden would make for `offer`, or the reason (in REASONS) it cannot pay it."""
    if offer.scheme != "exact":
        return "unsupported_scheme"
    network = offer.network
    if network is None or network not in usdc_by_network:
        return "unsupported_network"
    asset = offer.asset
    if asset is None or asset.lower() != usdc_by_network[network].lower():
        return "unsupported_asset"
    try:
        amount = parse_atomic(offer.amount)
    except AmountError:
        return "amount_not_whole"
    pay_to = offer.pay_to
    if pay_to is None or not _ADDRESS.match(pay_to):
        return "invalid_pay_to"
    extra = offer.extra
    name, version = extra.get("name"), extra.get("version")
    if not (isinstance(name, str) and isinstance(version, str) and name and version):
        known = KNOWN_DOMAINS.get(asset.lower())
        if known is None:
            return "missing_eip712_domain"
        name, version = known
    return Selection(offer, network, asset, pay_to, amount, name, version, offer.max_timeout_seconds)


def select_offer(
    challenge: Challenge, *, usdc_by_network: Mapping[str, str], preferred_networks: tuple[str, ...]
) -> Selection:
    payable: list[Selection] = []
    best_failure = "no_offers"
    for offer in challenge.offers:
        outcome = assess(offer, usdc_by_network)
        if isinstance(outcome, Selection):
            payable.append(outcome)
        elif REASONS.index(outcome) > REASONS.index(best_failure):
            best_failure = outcome
    if not payable:
        raise NoPayableEntry(best_failure)
    preferred = [s for s in payable if s.network in preferred_networks] or payable
    return min(preferred, key=lambda s: s.amount_atomic)


def payable_offers(challenge: Challenge, *, usdc_by_network: Mapping[str, str]) -> list[Selection]:
    """Every offer Paywarden could pay, in the challenge's order."""
    return [
        outcome
        for offer in challenge.offers
        if isinstance(outcome := assess(offer, usdc_by_network), Selection)
    ]
