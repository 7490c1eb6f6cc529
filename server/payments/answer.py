"""Reading a seller's answer to a paid request: its settlement claim and its own explanation.

Both are claims, never proof: `settled` comes only from the chain. The explanation is the
seller's words, untrusted text that is only ever shown fenced.
"""

from __future__ import annotations

import json

from server.sellers.client import SellerResponse
from server.x402.challenge import Challenge, ChallengeError, decode_payment_required
from server.x402.headers import PAYMENT_REQUIRED, PAYMENT_RESPONSE, X_PAYMENT_RESPONSE
from server.x402.receipt import SettlementReceipt, decode_payment_response

MAX_REASON_CHARS = 500
MAX_JSON_ERROR_BYTES = 32 * 1024
_ERROR_KEYS = ("error", "errorReason", "errorMessage", "message", "detail", "reason")


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
