"""Validate fetch_paid's input before anything is sent. Every refusal is `invalid_input` with a
stable `reason`; nothing here touches the network or the database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from server.kit.credentials import contains_credential, contains_paywarden_secret
from server.kit.errors import InputReason, InvalidInput
from server.kit.money import AmountError, parse_usd
from server.sellers.addresses import AddressPolicy, IPAddress, parse_ip_literal
from server.sellers.urls import InvalidHostName, Target, canonical_host, parse_target
from server.vocabulary import Origin
from server.x402.challenge import Challenge, ChallengeError, parse_challenge_document
from server.x402.headers import MAX_HEADER_BYTES, PAYMENT_HEADERS

MAX_HEADERS = 32
MAX_BODY_BYTES = 256 * 1024
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
# quote_payment is read-only: it sends nothing that could change something at the seller.
QUOTE_METHODS = ("GET", "HEAD")

_IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{8,128}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
        "http2-settings",
    }
)
_RESERVED = frozenset({"authorization", "host", "cookie", "x-org-api-key"}) | PAYMENT_HEADERS | _HOP_BY_HOP
# Whole families: proxy headers, and anything that looks like it carries or steers a payment.
_RESERVED_PREFIXES = ("proxy-", "payment-", "x-payment")


@dataclass(frozen=True)
class FetchPaidInput:
    target: Target  # the canonical request: judged, recorded and sent as it is
    method: str
    headers: dict[str, str]
    body: bytes | None
    idempotency_key: str | None
    max_amount_usd: Decimal | None
    origin: Origin | None

    @property
    def url(self) -> str:
        return self.target.url

    @property
    def host(self) -> str:
        return self.target.host

    @property
    def path(self) -> str:
        return self.target.path

    def with_key(self, key: str) -> FetchPaidInput:
        """The same request, naming the purchase `key` (a held payment's retry)."""
        return replace(self, idempotency_key=key)


@dataclass(frozen=True)
class PayX402Input:
    """pay_x402's input: the request as fetch_paid takes it, and the agent's copy of its 402."""

    request: FetchPaidInput
    claimed: Challenge  # what the agent says the seller answered: compared, never paid

    @property
    def idempotency_key(self) -> str | None:
        return self.request.idempotency_key

    @property
    def host(self) -> str:
        return self.request.host

    def with_key(self, key: str) -> PayX402Input:
        return replace(self, request=self.request.with_key(key))


@dataclass(frozen=True)
class ReceiptReport:
    """report_receipt's input: one payment, named by its key or its id, and the seller's header."""

    idempotency_key: str | None
    intent_id: str | None
    payment_response: str


def _is_loopback(host: str, literal: IPAddress | None) -> bool:
    if literal is None:
        return host == "localhost"
    return AddressPolicy().is_loopback(literal)


def _is_paywarden(host: str, port: int, literal: IPAddress | None, public_host: str) -> bool:
    """The URL points at Paywarden's own public address (any port of a public name)."""
    public = urlsplit("//" + public_host)
    try:
        public_name = canonical_host(public.hostname or "")
    except InvalidHostName:
        return False
    if host != public_name and not (public_name == "localhost" and _is_loopback(host, literal)):
        return False  # (on a localhost public URL, 127.0.0.1 and [::1] are Paywarden too)
    if literal is not None or host == "localhost":
        # On loopback other ports are other programs (sellers in development, for one).
        return public.port is None or public.port == port
    return True


def validate_fetch_paid(
    arguments: dict[str, Any], *, bearer: str | None, public_host: str, allow_private_hosts: bool
) -> FetchPaidInput:
    url = arguments.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidInput(InputReason.INVALID_URL)
    target = parse_target(url)
    literal = parse_ip_literal(target.host)  # canonical: an address is already its one spelling
    if target.scheme == "http" and not (allow_private_hosts and _is_loopback(target.host, literal)):
        raise InvalidInput(InputReason.HTTPS_REQUIRED)
    if _is_paywarden(target.host, target.port, literal, public_host):
        raise InvalidInput(InputReason.PAYWARDEN_API_URL)

    method = arguments.get("method") or "GET"
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise InvalidInput(InputReason.INVALID_METHOD)
    method = method.upper()

    headers = _validate_headers(arguments.get("headers"))

    body_value = arguments.get("body")
    body: bytes | None = None
    if body_value is not None:
        if not isinstance(body_value, str):
            raise InvalidInput(InputReason.INVALID_BODY)
        if method in ("GET", "HEAD"):
            raise InvalidInput(InputReason.BODY_NOT_ALLOWED)
        body = body_value.encode()
        if len(body) > MAX_BODY_BYTES:
            raise InvalidInput(InputReason.BODY_TOO_LARGE)

    key = arguments.get("idempotencyKey")
    if key is not None and (not isinstance(key, str) or not _IDEMPOTENCY_KEY.match(key)):
        raise InvalidInput(InputReason.INVALID_IDEMPOTENCY_KEY)

    max_amount: Decimal | None = None
    raw_max = arguments.get("maxAmountUsd")
    if raw_max is not None:
        try:
            max_amount = parse_usd(raw_max)
        except AmountError as exc:
            raise InvalidInput(InputReason.INVALID_MAX_AMOUNT) from exc

    raw_origin = arguments.get("origin")
    origin: Origin | None = None
    if raw_origin is not None:
        if not isinstance(raw_origin, str) or raw_origin not in {str(value) for value in Origin}:
            raise InvalidInput(InputReason.INVALID_ORIGIN)
        origin = Origin(raw_origin)

    # The URL as given and as it will be sent: decoding an escape can spell a credential out.
    texts = [url, target.url, *(f"{k}: {v}" for k, v in headers.items()), body_value or "", key or ""]
    if any(contains_credential(text, bearer=bearer) for text in texts):
        raise InvalidInput(InputReason.CONTAINS_CREDENTIAL)

    return FetchPaidInput(
        target=target,
        method=method,
        headers=headers,
        body=body,
        idempotency_key=key,
        max_amount_usd=max_amount,
        origin=origin,
    )


def _validate_headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(InputReason.INVALID_HEADER)
    if len(value) > MAX_HEADERS:
        raise InvalidInput(InputReason.TOO_MANY_HEADERS)
    headers: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name) or not isinstance(item, str):
            raise InvalidInput(InputReason.INVALID_HEADER)
        if any(ch in item for ch in "\r\n\0") or len(item) > 8192:
            raise InvalidInput(InputReason.INVALID_HEADER)
        lowered = name.lower()
        if lowered in _RESERVED or lowered.startswith(_RESERVED_PREFIXES):
            raise InvalidInput(InputReason.RESERVED_HEADER, header=lowered)
        headers[name] = item
    return headers


def validate_quote_payment(
    arguments: dict[str, Any], *, bearer: str | None, public_host: str, allow_private_hosts: bool
) -> FetchPaidInput:
    """quote_payment's input: fetch_paid's, with only the safe methods, checked first."""
    method = arguments.get("method")
    if isinstance(method, str) and method and method.upper() not in QUOTE_METHODS:
        raise InvalidInput(InputReason.METHOD_NOT_QUOTABLE)
    return validate_fetch_paid(
        arguments, bearer=bearer, public_host=public_host, allow_private_hosts=allow_private_hosts
    )


MAX_CHALLENGE_OFFERS = 64
MAX_PAYMENT_RESPONSE_CHARS = 4096
_INTENT_ID = re.compile(r"^pi_[A-Za-z0-9_-]{1,37}$")
_PRINTABLE = re.compile(r"^[\x20-\x7e]+$")


def validate_pay_x402(
    arguments: dict[str, Any], *, bearer: str | None, public_host: str, allow_private_hosts: bool
) -> PayX402Input:
    """pay_x402's input: fetch_paid's, and the 402 the agent received (its `accepts` as received,
    `x402Version`, and for v2 its `resource`), read as Paywarden reads a seller's."""
    request = validate_fetch_paid(
        arguments, bearer=bearer, public_host=public_host, allow_private_hosts=allow_private_hosts
    )
    version = arguments.get("x402Version")
    if type(version) is not int or version not in (1, 2):  # `True == 1` in Python
        raise InvalidInput(InputReason.INVALID_X402_VERSION)
    accepts = arguments.get("accepts")
    if (
        not isinstance(accepts, list)
        or not 1 <= len(accepts) <= MAX_CHALLENGE_OFFERS
        or not all(isinstance(entry, dict) for entry in accepts)
        or len(json.dumps(accepts)) > MAX_HEADER_BYTES
    ):
        raise InvalidInput(InputReason.INVALID_ACCEPTS)
    resource = arguments.get("resource")
    if version == 2 and not (
        isinstance(resource, dict)
        and isinstance(resource.get("url"), str)
        and len(json.dumps(resource)) <= MAX_HEADER_BYTES
    ):
        raise InvalidInput(InputReason.INVALID_RESOURCE)
    if version == 1 and resource is not None:
        raise InvalidInput(InputReason.INVALID_RESOURCE)
    document = {"x402Version": version, "accepts": accepts, "resource": resource}
    try:
        claimed = parse_challenge_document(document, expected_version=version)
    except ChallengeError as exc:  # cannot happen after the checks above; refused all the same
        raise InvalidInput(InputReason.INVALID_ACCEPTS) from exc
    return PayX402Input(request=request, claimed=claimed)


def validate_report_receipt(arguments: dict[str, Any], *, bearer: str | None) -> ReceiptReport:
    key, intent_id = arguments.get("idempotencyKey"), arguments.get("intentId")
    if (key is None) == (intent_id is None):
        raise InvalidInput(InputReason.PAYMENT_REFERENCE)
    if key is not None and (not isinstance(key, str) or not _IDEMPOTENCY_KEY.match(key)):
        raise InvalidInput(InputReason.INVALID_IDEMPOTENCY_KEY)
    if intent_id is not None and (not isinstance(intent_id, str) or not _INTENT_ID.match(intent_id)):
        raise InvalidInput(InputReason.PAYMENT_REFERENCE)
    header = arguments.get("paymentResponse")
    if (
        not isinstance(header, str)
        or len(header) > MAX_PAYMENT_RESPONSE_CHARS
        or not _PRINTABLE.match(header)
    ):
        raise InvalidInput(InputReason.INVALID_PAYMENT_RESPONSE)
    # Kept and shown to members: none of Paywarden's own secrets. (A transaction hash, which a
    # settlement answer may name, is shaped like a wallet key, so that shape is not refused here.)
    if contains_paywarden_secret(header, bearer=bearer):
        raise InvalidInput(InputReason.CONTAINS_CREDENTIAL)
    return ReceiptReport(idempotency_key=key, intent_id=intent_id, payment_response=header)
