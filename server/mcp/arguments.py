"""Tool arguments shared by several tools, with the JSON schema each declares.

Arguments are typed `Any` on purpose: the SDK would otherwise reject bad input with its own error,
and every refusal must be a tool error with a stable code, written by Paywarden (see
server/payments/inputs.py).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidatorFunctionWrapHandler, WithJsonSchema, WrapValidator

from server.payments.inputs import MAX_BODY_BYTES, METHODS, QUOTE_METHODS
from server.vocabulary import Origin as OriginValue

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


class NotText:
    """What a text argument becomes when the client sent something else: refused by validation
    (server/payments/inputs.py) with a stable code, never by the SDK's own error."""


NOT_TEXT = NotText()


class _Absent(str):
    """The default of a text argument declared as `str`: told apart from any text the agent sent."""

    __slots__ = ()


ABSENT = _Absent()


def text_or_none(value: str | NotText) -> str | NotText | None:
    """The argument as validation takes it: None when the agent left it out."""
    return None if value is ABSENT else value


def paid_request(
    *,
    url: Any,
    method: Any,
    headers: Any,
    body: str | NotText,
    idempotency_key: Any,
    max_amount_usd: Any,
    origin: Any,
) -> dict[str, Any]:
    """A paid request's arguments (fetch_paid's, and pay_x402's request) as validation reads them,
    by the names the agent sent them under."""
    return {
        "url": url,
        "method": method,
        "headers": headers,
        "body": text_or_none(body),
        "idempotencyKey": idempotency_key,
        "maxAmountUsd": max_amount_usd,
        "origin": origin,
    }


def _text_as_sent(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    return handler(value) if isinstance(value, str) else NOT_TEXT


# Declared as `str`, so the SDK hands the text over exactly as the agent wrote it: for any other
# type it would first try to read a string as JSON, and a JSON body such as '{"q": 1}' would
# arrive as an object, its bytes lost.
def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)  # the absent marker is not a value an agent should send


# The metadata of a free-text argument declared as `str` (default ABSENT): compose it with the
# argument's own schema, `Annotated[str, *TEXT, WithJsonSchema({...})]`.
TEXT_AS_SENT = WrapValidator(_text_as_sent)
NO_DEFAULT_IN_SCHEMA = Field(json_schema_extra=_no_default)

RequestBody = Annotated[
    str,
    TEXT_AS_SENT,
    NO_DEFAULT_IN_SCHEMA,
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
# USD amounts are advertised as decimal strings: a string-or-number union is a schema some clients
# cannot render or validate. A JSON number is still read (the arguments are checked by parse_usd).
USD_PATTERN = r"^[0-9]{1,12}(\.[0-9]{1,6})?$"

MaxAmountUsd = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": USD_PATTERN,
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
