"""What makes two calls "the same purchase": method, URL, and digests of body and headers."""

from __future__ import annotations

import hashlib
import secrets

from server.kit.jsonutil import canonical
from server.payments.inputs import FetchPaidInput


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def request_fingerprint(request: FetchPaidInput) -> str:
    headers = sorted((name.lower(), value) for name, value in request.headers.items())
    document = {
        "method": request.method,
        "url": request.url,
        "bodyDigest": _digest(request.body or b""),
        "headersDigest": _digest(canonical(headers).encode()),
    }
    return _digest(canonical(document).encode())


def handover_fingerprint(request: FetchPaidInput) -> str:
    """pay_x402's purchase: the same request, told apart from fetch_paid's, so a key of one tool is
    `idempotency_key_reused` for the other (one is paid by Paywarden, the other handed over)."""
    document = {"sentBy": "agent", "request": request_fingerprint(request)}
    return _digest(canonical(document).encode())


def new_idempotency_key() -> str:
    return "pw-" + secrets.token_hex(12)
