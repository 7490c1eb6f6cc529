"""Tool arguments shared by several tools, with the JSON schema each declares.

Arguments are typed `Any` on purpose: the SDK would otherwise reject bad input with its own error,
and every refusal must be a tool error with a stable code, written by Paywarden (see
server/payments/inputs.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema

from server.models.enums import Origin as OriginValue
from server.payments.inputs import MAX_BODY_BYTES, METHODS, QUOTE_METHODS

Url = Annotated[
    Any,
    WithJsonSchema({"type": "string", "maxLength": 2048, "description": "https:// URL on an allowed host."}),
]
Method = Annotated[Any, WithJsonSchema({"type": "string", "enum": list(METHODS), "default": "GET"})]
QuoteMethod = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(QUOTE_METHODS),
            "default": "GET",
            "description": "A quote only ever sends GET or HEAD; any other method is refused.",
        }
    ),
]
Headers = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": 32,
            "description": (
                "Extra request headers. Authorization, payment, Host, proxy and hop-by-hop "
                "headers are refused."
            ),
        }
    ),
]
RequestBody = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "maxLength": MAX_BODY_BYTES, "description": "Not allowed with GET or HEAD."}
    ),
]
QuoteBody = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "description": "Never sent: a quote is GET or HEAD, and a body is refused."}
    ),
]
IdempotencyKey = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^[A-Za-z0-9._:-]{8,128}$",
            "description": (
                "Only to retry a purchase: the key from pending_approval or payment_outcome_unknown."
            ),
        }
    ),
]
MaxAmountUsd = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": ["string", "number"],
            "description": 'Refuse to pay more than this many USD for this call, e.g. "0.05".',
        }
    ),
]
Origin = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "enum": [str(origin) for origin in OriginValue],
            "description": "Who asked for this request; recorded for audit only.",
        }
    ),
]
