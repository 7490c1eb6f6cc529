"""Reading a seller's answer to a paid request: its settlement claim, its own explanation, and
what the payment keeps of it as its receipt.

All are claims, never proof: `settled` comes only from the chain. The explanation is the
seller's words, untrusted text that is only ever shown fenced. The receipt keeps the body's
SHA-256, size and media type, never the body.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from server.payments.results import media_type
from server.sellers.client import SellerResponse
from server.x402.challenge import Challenge, ChallengeError, decode_payment_required
from server.x402.headers import PAYMENT_REQUIRED, PAYMENT_RESPONSE, X_PAYMENT_RESPONSE
from server.x402.receipt import SettlementReceipt, decode_payment_response

MAX_REASON_CHARS = 500
# The seller's settlement header is kept as received, up to this many characters (a real one is a
# few hundred): enough to show what it claimed, bounded whatever it sends.
MAX_PAYMENT_RESPONSE_CHARS = 4096
MAX_JSON_ERROR_BYTES = 32 * 1024
_ERROR_KEYS = ("error", "errorReason", "errorMessage", "message", "detail", "reason")


def settlement_header(response: SellerResponse, challenge: Challenge) -> str | None:
    """The seller's settlement header as received, of the challenge's protocol version (bounded)."""
    names = (X_PAYMENT_RESPONSE, PAYMENT_RESPONSE) if challenge.x402_version == 1 else (PAYMENT_RESPONSE,)
    for name in names:
        value = response.headers.get(name)
        if value:
            return str(value)[:MAX_PAYMENT_RESPONSE_CHARS]
    return None


def kept_of(response: SellerResponse, challenge: Challenge) -> dict[str, Any]:
    """What the payment keeps of the seller's answer, as intent fields: the digest and size of the
    body as received (incomplete when cut at the cap or broken off), its media type, and the
    settlement header. The body itself is never kept."""
    return {
        "body_sha256": hashlib.sha256(response.body).hexdigest(),
        "body_bytes": len(response.body),
        "body_truncated": response.truncated or response.body_error is not None,
        "content_type": media_type(response.content_type),
        "payment_response": settlement_header(response, challenge),
    }


def receipt_of(response: SellerResponse, challenge: Challenge) -> SettlementReceipt | None:
    """The seller's settlement answer, from the header of the challenge's protocol version."""
    names = (X_PAYMENT_RESPONSE, PAYMENT_RESPONSE) if challenge.x402_version == 1 else (PAYMENT_RESPONSE,)
    for name in names:
        receipt = decode_payment_response(response.headers.get(name))
        if receipt is not None:
            return receipt
    return None


def seller_reason(receipt: SettlementReceipt | None, response: SellerResponse) -> str | None:
    """The seller's own explanation of a refusal: untrusted text, only ever shown fenced."""
    if receipt is not None and receipt.error_reason:
        return receipt.error_reason[:MAX_REASON_CHARS]
    header = response.headers.get(PAYMENT_REQUIRED)
    if header:
        try:
            error = decode_payment_required(header).error
        except ChallengeError:
            error = None
        if error:
            return error[:MAX_REASON_CHARS]
    return _json_error(response)


def _json_error(response: SellerResponse) -> str | None:
    if "json" not in response.content_type.lower() or len(response.body) > MAX_JSON_ERROR_BYTES:
        return None
    try:
        document = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(document, dict):
        return None
    for key in _ERROR_KEYS:
        value = document.get(key)
        if isinstance(value, str) and value:
            return value[:MAX_REASON_CHARS]
        if isinstance(value, dict) and isinstance(value.get("message"), str) and value["message"]:
            return str(value["message"])[:MAX_REASON_CHARS]
    return None
