"""Does the 402 an agent says it received name the same terms as the one the seller gives now?

pay_x402 signs only for a challenge Paywarden fetched itself, and only when the agent's copy (its
`accepts`, `x402Version` and v2 `resource`) names the same payment: the same protocol version, the
same resource, and the same offers, compared on what they ask to be paid (scheme, network, asset,
amount, payee and, in v1, each offer's resource), in any order. Descriptions, `extra` and timeouts
are not terms and are not compared. The first difference is named, the offer about to be paid
first, so an agent that lowered the price hears `price`, not just that something differs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from enum import StrEnum

from server.x402.challenge import Challenge, Offer


class Mismatch(StrEnum):
    X402_VERSION = "x402_version"
    RESOURCE = "resource"
    SCHEME = "scheme"
    NETWORK = "network"
    ASSET = "asset"
    PAY_TO = "pay_to"
    PRICE = "price"
    OFFERS = "offers"  # the offer to pay is there, but the two lists of offers differ
    NO_CHALLENGE = "no_challenge"  # the URL did not answer 402 when Paywarden asked


def _lower(value: str | None) -> str | None:
    return value.lower() if value is not None else None


def _network(offer: Offer) -> str | None:
    """The network as the seller wrote it (a v1 name, or a CAIP-2 id), known to Paywarden or not."""
    network = offer.raw.get("network")
    return network if isinstance(network, str) else None


# An offer's terms in the order a difference is named: what is paid to whom before how much.
_TERMS: tuple[tuple[Mismatch, Callable[[Offer], str | None]], ...] = (
    (Mismatch.SCHEME, lambda offer: offer.scheme),
    (Mismatch.NETWORK, _network),
    (Mismatch.ASSET, lambda offer: _lower(offer.asset)),  # an address in any case is the same address
    (Mismatch.PAY_TO, lambda offer: _lower(offer.pay_to)),
    (Mismatch.PRICE, lambda offer: offer.amount),
    (Mismatch.RESOURCE, lambda offer: offer.resource_url),  # v1 names it per offer; v2: None
)


def terms(offer: Offer) -> tuple[str | None, ...]:
    return tuple(read(offer) for _, read in _TERMS)


def mismatch(claimed: Challenge, fetched: Challenge, paying: Offer) -> Mismatch | None:
    """The first way `claimed` (the agent's copy) differs from `fetched` (the seller's 402 now),
    whose offer `paying` Paywarden would pay; None when they name the same terms."""
    if claimed.x402_version != fetched.x402_version:
        return Mismatch.X402_VERSION
    if claimed.resource_url != fetched.resource_url:
        return Mismatch.RESOURCE
    candidates = list(claimed.offers)
    for difference, read in _TERMS:
        candidates = [offer for offer in candidates if read(offer) == read(paying)]
        if not candidates:
            return difference
    if Counter(map(terms, claimed.offers)) != Counter(map(terms, fetched.offers)):
        return Mismatch.OFFERS
    return None
