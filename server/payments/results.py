"""What fetch_paid hands back: a free answer, a paid one, or a held one. Views, not rows."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from server.kit.clock import isoformat
from server.kit.money import format_usd
from server.models import Approval, PaymentIntent
from server.sellers.client import SellerResponse

_TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-www-form",
)
_TEXT_SUFFIXES = ("+json", "+xml")


@dataclass(frozen=True)
class Body:
    """A seller's body: metadata anyone may read, and `text` that only goes out fenced."""

    content_type: str
    encoding: str  # utf-8 | base64
    size: int
    truncated: bool
    text: str

    def metadata(self) -> dict[str, Any]:
        return {
            "untrusted": True,
            "contentType": self.content_type,
            "encoding": self.encoding,
            "bytes": self.size,
            "truncated": self.truncated,
        }


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
    http_status: int
    host: str
    body: Body
    redirect_not_followed: bool = False


def receipt_state(intent: PaymentIntent) -> str:
    return {
        "settled": "settled",
        "settlement_pending": "pending",
        "submitted": "pending",
        "failed": "failed",
        "expired": "failed",
    }.get(intent.status, "unknown")


@dataclass(frozen=True)
class PaidOutcome:
    intent: PaymentIntent
    http_status: int | None
    replayed: bool
    body: Body | None
    body_error: str | None = None
    receipt_state_override: str | None = None  # "unknown" when the receipt could not be recorded

    @property
    def amount_usd(self) -> str:
        return format_usd(self.intent.amount_atomic, atomic=True)

    @property
    def receipt_state(self) -> str:
        return self.receipt_state_override or receipt_state(self.intent)


def payment_fields(intent: PaymentIntent) -> dict[str, Any]:
    """Fields shared by paid results and after-payment errors."""
    return {
        "host": intent.host,
        "intentId": intent.id,
        "idempotencyKey": intent.idempotency_key,
        "mode": "server_signed",
        "amountUsd": format_usd(intent.amount_atomic, atomic=True),
        "network": intent.network,
        "payTo": intent.pay_to,
        "receipt": {"state": receipt_state(intent), "txHash": intent.tx_hash},
        "txHash": intent.tx_hash,
    }


def usd(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


@dataclass(frozen=True)
class PendingOutcome:
    """A payment held for a human: nothing was signed. Retry with the same key once approved."""

    intent: PaymentIntent
    approval: Approval
    approval_url: str

    def fields(self) -> dict[str, Any]:
        approval = self.approval
        fields: dict[str, Any] = {
            "status": "pending_approval",
            "approvalId": approval.id,
            "approvalUrl": self.approval_url,
            "amountUsd": format_usd(approval.amount_atomic, atomic=True),
            "reason": approval.reason,
            "thresholdUsd": None
            if approval.threshold_atomic is None
            else format_usd(approval.threshold_atomic, atomic=True),
            "host": approval.host,
            "idempotencyKey": self.intent.idempotency_key,
            "network": approval.network,
            "payTo": approval.pay_to,
            "expiresAt": isoformat(approval.expires_at),
        }
        if approval.reason == "rule":
            fields["rules"] = list(approval.decision.get("rules", []))
            fields["ruleScopes"] = dict(approval.decision.get("ruleScopes", {}))
        return fields
