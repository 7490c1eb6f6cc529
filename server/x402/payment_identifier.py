"""The x402 `payment-identifier` extension, buyer side.

A seller that declares the extension in its 402 (`extensions["payment-identifier"]`, whose `info`
says whether it is `required`) reads an `id` from the signed payment's own `extensions` and keeps
one outcome per id: the same id with the same payment answers what it answered before, without
charging again, and the same id with another payment answers 409 Conflict.

Paywarden's id is derived from the payment intent, never drawn per attempt, so every sending of
one purchase carries the same id: Paywarden's own, and an agent's that sends the header pay_x402
handed it, twice. A seller that does not declare the extension gets no `extensions` at all.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from server.x402.challenge import Challenge

EXTENSION = "payment-identifier"
# What a seller answers when an id it knows comes with another payment.
CONFLICT_STATUS = 409


def payment_identifier(intent_id: str) -> str:
    """The intent's identifier: `pw_` and 32 hex digits, within the extension's 16 to 128
    characters of letters, digits, `_` and `-`."""
    digest = hashlib.sha256(b"paywarden/x402-payment-identifier/v1/" + intent_id.encode()).hexdigest()
    return "pw_" + digest[:32]


def declaration(challenge: Challenge) -> dict[str, Any] | None:
    """The seller's declaration of the extension, when its v2 challenge makes a well-formed one."""
    if challenge.x402_version != 2 or not challenge.extensions:
        return None
    declared = challenge.extensions.get(EXTENSION)
    if not isinstance(declared, dict):
        return None
    info = declared.get("info")
    if not isinstance(info, dict) or not isinstance(info.get("required"), bool):
        return None
    return declared


def payload_extensions(challenge: Challenge, identifier: str) -> dict[str, Any] | None:
    """The signed payment's `extensions`: the seller's declaration echoed as it wrote it, with the
    identifier added to its `info` (a seller checks that every field it declared comes back)."""
    declared = declaration(challenge)
    if declared is None:
        return None
    return {EXTENSION: {**declared, "info": {**declared["info"], "id": identifier}}}


def carried_identifier(payment_signature: str) -> str | None:
    """The identifier a `PAYMENT-SIGNATURE` value carries (Paywarden's own header, read back)."""
    try:
        payload = json.loads(base64.b64decode(payment_signature, validate=True))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    extensions = payload.get("extensions") if isinstance(payload, dict) else None
    extension = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    info = extension.get("info") if isinstance(extension, dict) else None
    found = info.get("id") if isinstance(info, dict) else None
    return found if isinstance(found, str) else None
