"""Reading a seller's 402 into the one payment Paywarden would make: the checks the preflight's
offer step runs for fetch_paid, quote_payment and diagnose_payment alike.

The challenge is read (x402 v2 header, or a v1 JSON body), one payable offer is chosen within
the call's maxAmountUsd, the host it names must be the URL's host, and the 402's own words are
checked for instructions aimed at the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from server.kit.money import atomic_to_usd, format_usd
from server.payments.errors import AmountExceedsMax, InvalidPaymentRequired, NoPayableEntry, ResourceMismatch
from server.payments.inputs import FetchPaidInput
from server.payments.ledger import PurchaseFacts
from server.sellers.client import SellerResponse
from server.sellers.urls import InvalidHostName, canonical_host
from server.vocabulary import WalletMode
from server.x402.challenge import Challenge, ChallengeError, decode_challenge, host_of
from server.x402.headers import PAYMENT_REQUIRED
from server.x402.instructions import challenge_reads_like_instructions
from server.x402.selection import NoPayableEntry as NoOffer
from server.x402.selection import Selection, select_offer


@dataclass(frozen=True)
class Offered:
    """What a seller's 402 offers, read and checked the same way by fetch_paid and quote_payment."""

    challenge: Challenge
    selection: Selection
    resource_host: str | None
    instruction_like: bool


def read_challenge(response: SellerResponse) -> Challenge:
    """x402 v2 from the PAYMENT-REQUIRED header; without one, x402 v1 from the JSON body."""
    try:
        return decode_challenge(response.headers.get(PAYMENT_REQUIRED), response.body)
    except ChallengeError as exc:
        raise InvalidPaymentRequired() from exc


def check_resource(host: str, challenge: Challenge, selection: Selection) -> str | None:
    """The host the challenge asks to be paid for, in the one spelling hosts have; another host
    than the URL's is refused."""
    named = selection.offer.resource_url or challenge.resource_url
    if named is None:
        return None
    try:
        resource_host = canonical_host(host_of(named) or "")
    except InvalidHostName as exc:
        raise ResourceMismatch() from exc
    if resource_host != host:
        raise ResourceMismatch()
    return resource_host


def choose_offer(challenge: Challenge, assets: Mapping[str, str], networks: tuple[str, ...]) -> Selection:
    """One payable offer: USDC at `assets` (network -> contract), preferring the policy's networks."""
    try:
        return select_offer(challenge, usdc_by_network=dict(assets), preferred_networks=networks)
    except NoOffer as exc:
        raise NoPayableEntry(reason=exc.reason) from exc


def check_max(amount_atomic: int, max_amount_usd: Decimal | None) -> None:
    if max_amount_usd is not None and atomic_to_usd(amount_atomic) > max_amount_usd:
        raise AmountExceedsMax(
            maxAmountUsd=format_usd(max_amount_usd), amountUsd=format_usd(amount_atomic, atomic=True)
        )


def instruction_like(challenge: Challenge, response: SellerResponse) -> bool:
    """Whether the 402's own words (its description, error and body) read like orders to an agent."""
    return challenge_reads_like_instructions(challenge.seller_texts(), response.body, response.content_type)


def purchase_facts(
    request: FetchPaidInput,
    first: SellerResponse,
    offered: Offered,
    *,
    key: str,
    fingerprint: str,
    payer: str,
    wallet_mode: WalletMode | None,
) -> PurchaseFacts:
    # The request that answered 402 (after any redirect) is the one judged, counted and paid.
    return PurchaseFacts(
        idempotency_key=key,
        fingerprint=fingerprint,
        method=first.request.method,
        host=first.target.host,
        path=first.target.path,
        resource=first.target.resource,
        via_paths=tuple(hop.path for hop in first.redirects),
        origin=request.origin,
        x402_version=offered.challenge.x402_version,
        resource_host=offered.resource_host,
        selection=offered.selection,
        payer=payer,
        wallet_mode=wallet_mode,
        instruction_like_description=offered.instruction_like,
    )
