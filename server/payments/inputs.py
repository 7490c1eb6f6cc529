"""Validate fetch_paid's input before anything is sent. Every refusal is `invalid_input` with a
stable `reason`; nothing here touches the network or the database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from server.kit.credentials import contains_credential
from server.kit.errors import InputReason, InvalidInput
from server.kit.money import AmountError, parse_usd
from server.sellers.addresses import AddressPolicy, IPAddress, parse_ip_literal
from server.sellers.urls import InvalidHostName, Target, canonical_host, parse_target
from server.vocabulary import Origin
from server.x402.headers import PAYMENT_HEADERS

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
