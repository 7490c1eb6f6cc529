"""Reading a 402 the way a diagnosis reports it: leniently, without judging, and without letting
any of the seller's text through.

`read_raw` finds the challenge wherever the seller put it and notes what is wrong with it (the
`reasons` of invalid_payment_required) and whether its version disagrees with its own shape. Each
offer field is shown only if it looks like what it is (a scheme, a network id, an address, a whole
amount, a host); anything else reads `[unreadable]`, since a seller could otherwise write
instructions to an agent into a field.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from server.sellers.client import SellerResponse
from server.x402.challenge import Challenge, Offer, host_of
from server.x402.headers import MAX_HEADER_BYTES, PAYMENT_REQUIRED
from server.x402.selection import Selection, assess

UNREADABLE = "[unreadable]"
# What each field of a seller's offer may look like to be shown; anything else reads UNREADABLE.
TOKENS = {
    "scheme": re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$"),
    "network": re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}(:[A-Za-z0-9_-]{1,64})?$"),
    "address": re.compile(r"^(0x[0-9a-fA-F]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$"),
    "amount": re.compile(r"^[0-9]{1,78}$"),
    "host": re.compile(r"^[a-z0-9]([a-z0-9.-]{0,252}[a-z0-9])?$"),
}

TESTNET_CHAIN_IDS = frozenset({5, 97, 17000, 43113, 80001, 80002, 84531, 84532, 421614, 11155111, 11155420})
MAINNET_CHAIN_IDS = frozenset({1, 10, 56, 137, 8453, 42161, 43114})
_TESTNET_WORDS = ("sepolia", "testnet", "devnet", "goerli", "holesky", "amoy", "fuji", "mumbai")
_MAINNET_NAMES = frozenset(
    {"base", "ethereum", "mainnet", "polygon", "arbitrum", "optimism", "avalanche", "solana"}
)


class ChallengeProblem(StrEnum):
    """Why a 402's challenge could not be read: the `reasons` of invalid_payment_required."""

    NO_CHALLENGE = "no_challenge"  # no PAYMENT-REQUIRED header and no x402 v1 JSON body
    HEADER_TOO_LARGE = "header_too_large"
    HEADER_NOT_BASE64_JSON = "header_not_base64_json"
    UNSUPPORTED_VERSION = "unsupported_version"
    NO_OFFER_LIST = "no_offer_list"


@dataclass(frozen=True)
class AcceptSeen:
    """One payment option of the 402, every seller field a simple token or UNREADABLE."""

    scheme: str | None
    network: str | None
    asset: str | None
    amount: str | None
    pay_to: str | None
    payable: bool
    reason: str | None  # why Paywarden cannot pay it
    amount_atomic: int | None = None  # when payable


def token(value: Any, kind: str) -> str | None:
    """A seller's field as it may appear in a result: a simple token of its kind, or UNREADABLE."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and kind == "amount" and value >= 0:
        return str(value)
    if isinstance(value, str) and TOKENS[kind].match(value):
        return value
    return UNREADABLE


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class RawChallenge:
    """The challenge as the seller wrote it, read without judging it."""

    version: int | None
    offers: list[dict[str, Any]]
    problems: tuple[ChallengeProblem, ...]
    mismatch: bool


def _version(document: Any) -> int | None:
    value = document.get("x402Version") if isinstance(document, dict) else None
    return value if type(value) is int else None


def read_raw(response: SellerResponse) -> RawChallenge:
    header = response.headers.get(PAYMENT_REQUIRED)
    body = _json(response.body[:65536])
    body_version = _version(body)
    problems: list[ChallengeProblem] = []
    document: Any = None
    expected = 2 if header else 1
    if header:
        if len(header) > MAX_HEADER_BYTES:
            problems.append(ChallengeProblem.HEADER_TOO_LARGE)
        else:
            try:
                document = json.loads(base64.b64decode(header.strip(), validate=True))
            except (binascii.Error, ValueError, UnicodeDecodeError):
                problems.append(ChallengeProblem.HEADER_NOT_BASE64_JSON)
    elif body_version is not None:
        document = body
    else:
        problems.append(ChallengeProblem.NO_CHALLENGE)
    version = _version(document)
    if document is not None and version != expected:
        problems.append(ChallengeProblem.UNSUPPORTED_VERSION)
    accepts = document.get("accepts") if isinstance(document, dict) else None
    if document is not None and not isinstance(accepts, list):
        problems.append(ChallengeProblem.NO_OFFER_LIST)
    offers = [offer for offer in accepts[:64] if isinstance(offer, dict)] if isinstance(accepts, list) else []
    shape_version = version if version in (1, 2) else expected
    mismatch = (
        (version is not None and version != expected)
        or (header is not None and body_version is not None and body_version != version)
        or any(other_shape(offer, shape_version) for offer in offers)
    )
    return RawChallenge(version, offers, tuple(problems), mismatch)


def other_shape(offer: Mapping[str, Any], version: int) -> bool:
    """An offer written in the other version's shape (the amount's field name gives it away)."""
    if version == 2:
        return "amount" not in offer and "maxAmountRequired" in offer
    return "maxAmountRequired" not in offer and "amount" in offer


def kind_of_network(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    lowered = name.lower()
    if any(word in lowered for word in _TESTNET_WORDS):
        return "testnet"
    if lowered.startswith("eip155:"):
        try:
            chain_id = int(lowered.split(":", 1)[1])
        except ValueError:
            return None
        if chain_id in TESTNET_CHAIN_IDS:
            return "testnet"
        return "mainnet" if chain_id in MAINNET_CHAIN_IDS else None
    if lowered.startswith("solana:"):
        return "mainnet" if lowered.startswith("solana:5eykt4") else "testnet"
    return "mainnet" if lowered in _MAINNET_NAMES else None


def accepts_seen(
    offers: list[dict[str, Any]], version: int, assets: Mapping[str, str]
) -> tuple[AcceptSeen, ...]:
    seen: list[AcceptSeen] = []
    for raw in offers:
        outcome = assess(Offer(raw, version), assets)
        payable = isinstance(outcome, Selection)
        amount_key = "maxAmountRequired" if version == 1 else "amount"
        seen.append(
            AcceptSeen(
                scheme=token(raw.get("scheme"), "scheme"),
                network=token(raw.get("network"), "network"),
                asset=token(raw.get("asset"), "address"),
                amount=token(raw.get(amount_key), "amount"),
                pay_to=token(raw.get("payTo"), "address"),
                payable=payable,
                reason=None if isinstance(outcome, Selection) else outcome,
                amount_atomic=outcome.amount_atomic if isinstance(outcome, Selection) else None,
            )
        )
    return tuple(seen)


def resource_host_seen(challenge: Challenge | None, raw: RawChallenge) -> str | None:
    named: Any = None
    if challenge is not None:
        named = challenge.resource_url or next(
            (o.resource_url for o in challenge.offers if o.resource_url), None
        )
    if named is None:
        named = next(
            (offer.get("resource") for offer in raw.offers if isinstance(offer.get("resource"), str)), None
        )
    if not isinstance(named, str):
        return None
    return token(host_of(named), "host") if host_of(named) else UNREADABLE


def public_url(url: str) -> str:
    """The URL without credentials, query string or fragment: what a report may show."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path or '/'}"
