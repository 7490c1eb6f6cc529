"""Decode a seller's settlement answer (`PAYMENT-RESPONSE`): a claim to check, never proof."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass

from server.x402.headers import MAX_HEADER_BYTES

_TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")


@dataclass(frozen=True)
class SettlementReceipt:
    success: bool
    transaction: str | None  # only a well-formed 0x hash is kept
    network: str | None
    payer: str | None
    error_reason: str | None  # the seller's words: untrusted text


def decode_payment_response(value: str | None) -> SettlementReceipt | None:
    """None when the header is missing or unreadable."""
    if not value or len(value) > MAX_HEADER_BYTES:
        return None
    try:
        document = json.loads(base64.b64decode(value.strip(), validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(document, dict) or not isinstance(document.get("success"), bool):
        return None
    tx = document.get("transaction")
    reason = document.get("errorReason") or document.get("errorMessage")
    network = document.get("network")
    payer = document.get("payer")
    return SettlementReceipt(
        success=document["success"],
        transaction=tx if isinstance(tx, str) and _TX_HASH.match(tx) else None,
        network=network if isinstance(network, str) else None,
        payer=payer if isinstance(payer, str) else None,
        error_reason=reason[:500] if isinstance(reason, str) else None,
    )
