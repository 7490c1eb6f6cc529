"""Decode a seller's 402 challenge: x402 v2 (a base64 JSON `PAYMENT-REQUIRED` header) or x402 v1
(the same offers as a JSON body, with `maxAmountRequired`, legacy network names and a resource
per offer).

Everything here is untrusted input: sizes are bounded, types are checked, and each offer is kept
verbatim so the signed payload can echo it exactly as the seller wrote it. Offer properties read
both versions, so choosing what to pay never depends on the version.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from server.x402.headers import MAX_HEADER_BYTES

MAX_V1_BODY_BYTES = 64 * 1024

# x402 v1 named networks; v2 uses CAIP-2 ids. Only the networks Paywarden pays on are mapped:
# any other name (or a CAIP-2 id in a v1 offer) is simply not payable.
V1_NETWORKS = {"base": "eip155:8453", "base-sepolia": "eip155:84532"}


class ChallengeError(ValueError):
    """The 402 carried no readable challenge."""


@dataclass(frozen=True)
class Offer:
    raw: dict[str, Any]
    version: int = 2

    def _text(self, key: str) -> str | None:
        value = self.raw.get(key)
        return value if isinstance(value, str) else None

    @property
    def scheme(self) -> str | None:
        return self._text("scheme")

    @property
    def network(self) -> str | None:
        """The CAIP-2 network id (a v1 name is translated when it is one Paywarden knows)."""
        network = self._text("network")
        if self.version == 1 and network is not None:
            return V1_NETWORKS.get(network)  # None: a network Paywarden does not pay on
        return network

    @property
    def asset(self) -> str | None:
        return self._text("asset")

    @property
    def amount(self) -> str | None:
        return self._text("maxAmountRequired" if self.version == 1 else "amount")

    @property
    def pay_to(self) -> str | None:
        return self._text("payTo")

    @property
    def max_timeout_seconds(self) -> int | None:
        value = self.raw.get("maxTimeoutSeconds")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def extra(self) -> dict[str, Any]:
        value = self.raw.get("extra")
        return value if isinstance(value, dict) else {}

    @property
    def resource_url(self) -> str | None:
        """v1 names the resource in each offer; v2 names it once for the whole challenge."""
        return self._text("resource") if self.version == 1 else None

    @property
    def description(self) -> str | None:
        return self._text("description")


@dataclass(frozen=True)
class Challenge:
    x402_version: int
    offers: tuple[Offer, ...]
    resource: dict[str, Any] | None = None
    error: str | None = None
    extensions: dict[str, Any] | None = field(default=None)

    @property
    def resource_url(self) -> str | None:
        if self.resource is None:
            return None
        url = self.resource.get("url")
        return url if isinstance(url, str) else None

    @property
    def resource_host(self) -> str | None:
        return host_of(self.resource_url)

    @property
    def description(self) -> str | None:
        if self.resource is None:
            return None
        text = self.resource.get("description")
        return text if isinstance(text, str) else None

    def seller_texts(self) -> list[str]:
        """Every piece of free text the seller wrote into the challenge, for the instruction check."""
        texts: list[str] = []
        if self.error:
            texts.append(self.error)
        if self.description:
            texts.append(self.description)
        for offer in self.offers:
            if offer.description:
                texts.append(offer.description)
            texts.extend(_strings(offer.extra))
        if self.extensions:
            texts.extend(_strings(self.extensions))
        return texts


def host_of(url: str | None) -> str | None:
    """The lower-case host of a URL a seller named, or None when it names none readable."""
    if not url:
        return None
    try:
        host = urlsplit(url).hostname
    except ValueError:
        return None
    return host.lower().rstrip(".") if host else None


def _strings(value: Any, depth: int = 0) -> list[str]:
    if isinstance(value, str):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item, depth + 1)]
    if isinstance(value, list):
        return [text for item in value[:64] for text in _strings(item, depth + 1)]
    return []


def decode_payment_required(value: str) -> Challenge:
    if len(value) > MAX_HEADER_BYTES:
        raise ChallengeError("the PAYMENT-REQUIRED header is too large")
    try:
        document = json.loads(base64.b64decode(value.strip(), validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ChallengeError("the PAYMENT-REQUIRED header is not base64 JSON") from exc
    return parse_challenge_document(document, expected_version=2)


def decode_challenge(header: str | None, body: bytes) -> Challenge:
    """A 402's challenge: x402 v2 from the PAYMENT-REQUIRED header, or without one, x402 v1 from
    the JSON body. Everything that reads a 402 reads it this way."""
    if header:
        return decode_payment_required(header)
    return decode_v1_body(body)


def decode_v1_body(body: bytes) -> Challenge:
    """An x402 v1 challenge: the 402's JSON body with `x402Version: 1`."""
    if len(body) > MAX_V1_BODY_BYTES:
        raise ChallengeError("the 402 body is too large to be a challenge")
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChallengeError("the 402 body is not JSON") from exc
    return parse_challenge_document(document, expected_version=1)


def parse_challenge_document(document: Any, *, expected_version: int) -> Challenge:
    if not isinstance(document, dict):
        raise ChallengeError("the challenge is not a JSON object")
    version = document.get("x402Version")
    if type(version) is not int or version != expected_version:  # `true == 1` in Python
        raise ChallengeError(f"expected x402Version {expected_version}")
    accepts = document.get("accepts")
    if not isinstance(accepts, list) or len(accepts) > 64:
        raise ChallengeError("the challenge has no list of offers")
    offers = tuple(Offer(entry, version) for entry in accepts if isinstance(entry, dict))
    resource = document.get("resource")
    error = document.get("error")
    extensions = document.get("extensions")
    return Challenge(
        x402_version=version,
        offers=offers,
        resource=resource if isinstance(resource, dict) else None,
        error=error if isinstance(error, str) else None,
        extensions=extensions if isinstance(extensions, dict) else None,
    )
