"""Decode a seller's 402 challenge (x402 v2: a base64 JSON `PAYMENT-REQUIRED` header).

Everything here is untrusted input: sizes are bounded, types are checked, and each offer is kept
verbatim so the signed payload can echo it exactly as the seller wrote it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from server.x402.headers import MAX_HEADER_BYTES


class ChallengeError(ValueError):
    """The 402 carried no readable challenge."""


@dataclass(frozen=True)
class Offer:
    raw: dict[str, Any]

    def _text(self, key: str) -> str | None:
        value = self.raw.get(key)
        return value if isinstance(value, str) else None

    @property
    def scheme(self) -> str | None:
        return self._text("scheme")

    @property
    def network(self) -> str | None:
        return self._text("network")

    @property
    def asset(self) -> str | None:
        return self._text("asset")

    @property
    def amount(self) -> str | None:
        return self._text("amount")

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
        url = self.resource_url
        if not url:
            return None
        try:
            host = urlsplit(url).hostname
        except ValueError:
            return None
        return host.lower().rstrip(".") if host else None

    @property
    def description(self) -> str | None:
        if self.resource is None:
            return None
        text = self.resource.get("description")
        return text if isinstance(text, str) else None


def decode_payment_required(value: str) -> Challenge:
    if len(value) > MAX_HEADER_BYTES:
        raise ChallengeError("the PAYMENT-REQUIRED header is too large")
    try:
        document = json.loads(base64.b64decode(value.strip(), validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ChallengeError("the PAYMENT-REQUIRED header is not base64 JSON") from exc
    return parse_challenge_document(document, expected_version=2)


def parse_challenge_document(document: Any, *, expected_version: int) -> Challenge:
    if not isinstance(document, dict):
        raise ChallengeError("the challenge is not a JSON object")
    version = document.get("x402Version")
    if version != expected_version:
        raise ChallengeError(f"expected x402Version {expected_version}")
    accepts = document.get("accepts")
    if not isinstance(accepts, list) or len(accepts) > 64:
        raise ChallengeError("the challenge has no list of offers")
    offers = tuple(Offer(entry) for entry in accepts if isinstance(entry, dict))
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
