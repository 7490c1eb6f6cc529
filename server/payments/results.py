"""What fetch_paid comes back with: a free answer, a paid one, or a held one. Domain values, not
wire documents: server/mcp/schemas renders them."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from server.kit.money import format_usd
from server.models import Approval, PaymentIntent
from server.sellers.client import SellerResponse
from server.vocabulary import IntentStatus

_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-www-form",
)
_TEXT_SUFFIXES = ("+json", "+xml")

# A seller's Content-Type reaches the agent outside the fence, so only this much of it does: a
# registered top-level type and an RFC 6838 restricted name, lower-case, no parameters.
TOP_LEVEL_TYPES = (
    "application",
    "audio",
    "font",
    "haptics",
    "image",
    "message",
    "model",
    "multipart",
    "text",
    "video",
)
MEDIA_TYPE_PATTERN = rf"^({'|'.join(TOP_LEVEL_TYPES)})/[a-z0-9][a-z0-9!#$&^_.+-]{{0,63}}$"
_MEDIA_TYPE = re.compile(MEDIA_TYPE_PATTERN)
UNKNOWN_MEDIA_TYPE = "application/octet-stream"


def media_type(header: str) -> str:
    """The media type of a seller's Content-Type header, reduced to `type/subtype` in a closed
    grammar; anything else (parameters, comments, words) is dropped, and an unreadable value is
    `application/octet-stream`."""
    media = header.split(";", 1)[0].strip().lower()
    return media if _MEDIA_TYPE.match(media) else UNKNOWN_MEDIA_TYPE


class ReceiptState(StrEnum):
    """What the agent may believe about a payment's settlement."""

    SETTLED = "settled"  # found on-chain
    PENDING = "pending"  # sent; not (yet) seen on-chain
    FAILED = "failed"
    UNKNOWN = "unknown"  # the seller served, but our record of it failed


def receipt_state(intent: PaymentIntent) -> ReceiptState:
    return {
        IntentStatus.SETTLED: ReceiptState.SETTLED,
        IntentStatus.SETTLEMENT_PENDING: ReceiptState.PENDING,
        IntentStatus.SUBMITTED: ReceiptState.PENDING,
        IntentStatus.FAILED: ReceiptState.FAILED,
        IntentStatus.EXPIRED: ReceiptState.FAILED,
    }.get(intent.status, ReceiptState.UNKNOWN)


@dataclass(frozen=True)
class Body:
    """A seller's body: what anyone may know about it, and `text` that only goes out fenced."""

    content_type: str  # the seller's media type, reduced to a closed grammar (media_type)
    encoding: str  # utf-8 | base64
    size: int
    truncated: bool
    text: str


def _is_text(media: str) -> bool:
    return media.startswith(_TEXT_TYPES) or media.endswith(_TEXT_SUFFIXES)


def body_of(response: SellerResponse) -> Body:
    content_type = media_type(response.content_type)
    if _is_text(content_type):
        try:
            return Body(
                content_type, "utf-8", len(response.body), response.truncated, response.body.decode("utf-8")
            )
        except UnicodeDecodeError:
            if response.truncated:
                # A cut may split a multi-byte character; drop the partial tail only.
                text = response.body.decode("utf-8", errors="ignore")
                return Body(content_type, "utf-8", len(response.body), True, text)
    encoded = base64.b64encode(response.body).decode()
    return Body(content_type, "base64", len(response.body), response.truncated, encoded)


@dataclass(frozen=True)
class FreeOutcome:
    """The URL answered without asking for payment."""

    http_status: int
    host: str
    body: Body
    redirect_not_followed: bool = False


@dataclass(frozen=True)
class PaidOutcome:
    intent: PaymentIntent
    http_status: int | None
    replayed: bool
    body: Body | None
    body_error: str | None = None
    receipt_state_override: ReceiptState | None = None  # UNKNOWN when the receipt could not be recorded

    @property
    def receipt_state(self) -> ReceiptState:
        return self.receipt_state_override or receipt_state(self.intent)


@dataclass(frozen=True)
class SignedOutcome:
    """pay_x402: the payment signed under the policy and handed to the agent, whose own HTTP client
    sends `header_name: header_value` to the seller. `identifier` is the payment-identifier it
    carries, when the seller declared the extension."""

    intent: PaymentIntent
    header_name: str
    header_value: str
    replayed: bool
    identifier: str | None

    @property
    def receipt_state(self) -> ReceiptState:
        return receipt_state(self.intent)


@dataclass(frozen=True)
class PendingOutcome:
    """A payment held for a human: nothing was signed. Retry with the same key once approved."""

    intent: PaymentIntent
    approval: Approval
    approval_url: str


def after_payment_fields(intent: PaymentIntent) -> dict[str, Any]:
    """The fields an error raised after signing carries, so the agent can find the payment."""
    return {
        "host": intent.host,
        "intentId": intent.id,
        "idempotencyKey": intent.idempotency_key,
        "mode": "server_signed",
        "amountUsd": format_usd(intent.amount_atomic, atomic=True),
        "network": intent.network,
        "payTo": intent.pay_to,
        "receipt": {"state": str(receipt_state(intent)), "txHash": intent.tx_hash},
        "txHash": intent.tx_hash,
    }
