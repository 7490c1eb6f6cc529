"""Validate fetch_paid's input before anything is sent. Every refusal is `invalid_input` with a
stable `reason`; nothing here touches the network or the database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from server.kit.errors import InputReason, InvalidInput
from server.kit.money import AmountError, parse_usd
from server.models.enums import Origin
from server.policy.hosts import HostPatternError, normalize_host
from server.sellers.addresses import AddressPolicy, InvalidHost, IPAddress, parse_ip_literal
from server.x402.headers import PAYMENT_HEADERS

MAX_URL_LENGTH = 2048
MAX_HEADERS = 32
MAX_BODY_BYTES = 256 * 1024
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

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
_CREDENTIAL = re.compile(
    r"(pw_(at|rt|cs)_[A-Za-z0-9_-]{16,})"  # Paywarden tokens and client secrets
    r"|(pwmk_[A-Za-z0-9_-]{20,})"  # the master key
    r"|((?<![0-9A-Za-z])(0x)?[0-9a-fA-F]{64}(?![0-9A-Za-z]))"  # shaped like a wallet private key
    r"|(-----BEGIN ([A-Z]+ )?PRIVATE KEY-----)"  # PEM keys (CDP API secrets among them)
)


@dataclass(frozen=True)
class FetchPaidInput:
    url: str
    method: str
    headers: dict[str, str]
    body: bytes | None
    idempotency_key: str | None
    max_amount_usd: Decimal | None
    origin: Origin | None
    host: str
    path: str


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _literal(host: str) -> IPAddress | None:
    """The address a numeric host means in any spelling (0x7f.1 is 127.0.0.1), or None for a name."""
    try:
        return parse_ip_literal(host)
    except InvalidHost as exc:
        raise InvalidInput(InputReason.INVALID_URL) from exc


def _is_loopback(host: str, literal: IPAddress | None) -> bool:
    if literal is None:
        return host == "localhost"
    return AddressPolicy().is_loopback(literal)


def _is_paywarden(host: str, port: int, literal: IPAddress | None, public_host: str) -> bool:
    """The URL points at Paywarden's own public address (any port of a public name)."""
    public = urlsplit("//" + public_host)
    public_name = (public.hostname or "").rstrip(".").lower()
    if host != public_name:
        return False
    if literal is not None or host == "localhost":
        # On loopback other ports are other programs (sellers in development, for one).
        return public.port is None or public.port == port
    return True


def _contains_credential(value: str, bearer: str | None) -> bool:
    return bool((bearer and bearer in value) or _CREDENTIAL.search(value))


def validate_fetch_paid(
    arguments: dict[str, Any], *, bearer: str | None, public_host: str, allow_private_hosts: bool
) -> FetchPaidInput:
    url = arguments.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidInput(InputReason.INVALID_URL)
    if len(url) > MAX_URL_LENGTH:
        raise InvalidInput(InputReason.INVALID_URL)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url) or "\\" in url:
        raise InvalidInput(InputReason.INVALID_URL)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(InputReason.INVALID_URL) from exc
    if parts.scheme and parts.scheme not in ("https", "http"):
        raise InvalidInput(InputReason.HTTPS_REQUIRED)
    if not parts.scheme or not parts.hostname:
        raise InvalidInput(InputReason.INVALID_URL)
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(InputReason.URL_CREDENTIALS)
    try:
        host = normalize_host(parts.hostname)
    except HostPatternError as exc:
        raise InvalidInput(InputReason.INVALID_URL) from exc
    literal = _literal(host)
    if parts.scheme == "http" and not (allow_private_hosts and _is_loopback(host, literal)):
        raise InvalidInput(InputReason.HTTPS_REQUIRED)
    if _is_paywarden(host, port or _DEFAULT_PORTS[parts.scheme], literal, public_host):
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

    texts = [url, *(f"{k}: {v}" for k, v in headers.items()), body_value or "", key or ""]
    if any(_contains_credential(text, bearer) for text in texts):
        raise InvalidInput(InputReason.CONTAINS_CREDENTIAL)

    return FetchPaidInput(
        url=url,
        method=method,
        headers=headers,
        body=body,
        idempotency_key=key,
        max_amount_usd=max_amount,
        origin=origin,
        host=host,
        path=parts.path or "/",
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
