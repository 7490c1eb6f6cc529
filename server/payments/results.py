"""What fetch_paid comes back with: a free answer, a paid one, or a held one. Domain values, not
wire documents: server/mcp/schemas renders them."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from server.kit.money import format_usd
from server.models import Approval, PaymentIntent
from server.models.enums import IntentStatus
from server.sellers.client import SellerResponse

_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-www-form",
)
_TEXT_SUFFIXES = ("+json", "+xml")


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

    content_type: str  # the seller's header, untrusted: rendered only through a closed grammar
    encoding: str  # utf-8 | base64
    size: int
    truncated: bool
    text: str


def _is_text(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.startswith(_TEXT_TYPES) or media.endswith(_TEXT_SUFFIXES)


def body_of(response: SellerResponse) -> Body:
    content_type = response.content_type[:200]
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
