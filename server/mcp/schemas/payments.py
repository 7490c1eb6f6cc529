"""fetch_paid's, pay_x402's, report_receipt's and list_payments' results."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.mcp.schemas.common import timestamp, usd
from server.models import PaymentIntent
from server.payments.results import (
    MEDIA_TYPE_PATTERN,
    Body,
    FreeOutcome,
    PaidOutcome,
    PendingOutcome,
    SignedOutcome,
    receipt_state,
)
from server.vocabulary import ApprovalPrompt, HoldReason, IntentStatus, PaymentSender


class BodyMeta(BaseModel):
    untrusted: Literal[True]
    # Only the media type, in a closed grammar: a seller's words never reach it.
    contentType: str = Field(pattern=MEDIA_TYPE_PATTERN)
    encoding: Literal["utf-8", "base64"]
    bytes: int
    truncated: bool


class Receipt(BaseModel):
    state: Literal["settled", "pending", "failed", "unknown"]
    txHash: str | None


class PaymentFields(BaseModel):
    """What a paid call's result says of its payment, made or held (fetch_paid, pay_x402)."""

    model_config = ConfigDict(extra="allow")

    host: str
    intentId: str | None = None
    idempotencyKey: str | None = None
    replayed: bool | None = None
    amountUsd: str | None = None
    network: str | None = None
    payTo: str | None = None
    receipt: Receipt | None = None
    approvalId: str | None = None
    approvalUrl: str | None = None
    approvalPrompt: ApprovalPrompt | None = None
    next: str | None = None
    reason: HoldReason | None = None
    thresholdUsd: str | None = None
    expiresAt: str | None = None
    rules: list[str] | None = None
    ruleScopes: dict[str, str] | None = None


class FetchPaidResult(PaymentFields):
    status: Literal["ok", "paid", "pending_approval"]
    httpStatus: int | None = None
    body: BodyMeta | None = None
    redirectNotFollowed: bool | None = None
    mode: Literal["server_signed", "client_signs"] | None = None
    bodyError: str | None = None


class PayX402Result(PaymentFields):
    status: Literal["signed", "pending_approval"]
    mode: Literal["agent_sends"] | None = None
    x402Version: Literal[1, 2] | None = None
    headerName: Literal["PAYMENT-SIGNATURE", "X-PAYMENT"] | None = Field(
        default=None, description="The header to add to the request, exactly as named."
    )
    headerValue: str | None = Field(default=None, description="Its value, exactly as given.")
    validBefore: str | None = Field(
        default=None, description="When the signed authorisation stops being valid: send it before then."
    )
    paymentIdentifier: str | None = Field(
        default=None,
        description="The x402 payment-identifier the header carries, when the seller declared the extension.",
    )


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def body_meta(body: Body) -> BodyMeta:
    return BodyMeta(
        untrusted=True,
        contentType=body.content_type,
        encoding="base64" if body.encoding == "base64" else "utf-8",
        bytes=body.size,
        truncated=body.truncated,
    )


def free(outcome: FreeOutcome) -> dict[str, Any]:
    result = FetchPaidResult(
        status="ok", httpStatus=outcome.http_status, host=outcome.host, body=body_meta(outcome.body)
    )
    if outcome.redirect_not_followed:
        result.redirectNotFollowed = True
    return _dump(result)


def paid(outcome: PaidOutcome) -> dict[str, Any]:
    intent = outcome.intent
    result = FetchPaidResult(
        status="paid",
        httpStatus=outcome.http_status,
        host=intent.host,
        intentId=intent.id,
        idempotencyKey=intent.idempotency_key,
        replayed=outcome.replayed,
        mode="server_signed",
        amountUsd=usd(intent.amount_atomic),
        network=intent.network,
        payTo=intent.pay_to,
        receipt=Receipt(state=outcome.receipt_state.value, txHash=intent.tx_hash),
        body=body_meta(outcome.body) if outcome.body else None,
    )
    if outcome.body_error:
        result.bodyError = outcome.body_error
    return _dump(result)


# Fixed words for the person, whatever the client did with the elicitation: many clients cannot
# show one, so the link is always there to give them.
PENDING_NEXT = (
    "A person must approve this payment before it is made. Show the user approvalUrl as a plain link "
    "to open and approve with their passkey; then poll get_approval_status and, once approved, call "
    "{tool} again with the same arguments and this idempotencyKey."
)


def signed(outcome: SignedOutcome) -> dict[str, Any]:
    intent = outcome.intent
    result = PayX402Result(
        status="signed",
        host=intent.host,
        intentId=intent.id,
        idempotencyKey=intent.idempotency_key,
        replayed=outcome.replayed,
        mode="agent_sends",
        x402Version=1 if intent.x402_version == 1 else 2,
        headerName="X-PAYMENT" if intent.x402_version == 1 else "PAYMENT-SIGNATURE",
        headerValue=outcome.header_value,
        validBefore=timestamp(datetime.fromtimestamp(intent.valid_before, UTC)),
        paymentIdentifier=outcome.identifier,
        amountUsd=usd(intent.amount_atomic),
        network=intent.network,
        payTo=intent.pay_to,
        receipt=Receipt(state=outcome.receipt_state.value, txHash=intent.tx_hash),
    )
    return _dump(result)


def pending(
    outcome: PendingOutcome,
    prompt: ApprovalPrompt = ApprovalPrompt.NOT_SUPPORTED,
    *,
    tool: str = "fetch_paid",
) -> dict[str, Any]:
    approval = outcome.approval
    result = FetchPaidResult(
        status="pending_approval",
        approvalId=approval.id,
        approvalUrl=outcome.approval_url,
        approvalPrompt=prompt,
        next=PENDING_NEXT.format(tool=tool),
        amountUsd=usd(approval.amount_atomic),
        reason=approval.reason,
        thresholdUsd=None if approval.threshold_atomic is None else usd(approval.threshold_atomic),
        host=approval.host,
        idempotencyKey=outcome.intent.idempotency_key,
        network=approval.network,
        payTo=approval.pay_to,
        expiresAt=timestamp(approval.expires_at),
    )
    if approval.reason == HoldReason.RULE:
        result.rules = list(approval.decision.get("rules", []))
        result.ruleScopes = dict(approval.decision.get("ruleScopes", {}))
    return _dump(result)


class PaymentItem(BaseModel):
    intentId: str
    status: IntentStatus
    amountUsd: str
    network: str
    asset: str
    host: str
    transactionHash: str | None
    createdAt: str
    sentBy: PaymentSender = Field(
        description="Who sent the signed payment to the seller: paywarden (fetch_paid) or agent (pay_x402)."
    )
    termsSha256: str | None = Field(
        description="SHA-256 (hex) of the paid accepts entry as canonical JSON: the terms agreed to."
    )
    bodySha256: str | None = Field(
        description="SHA-256 (hex) of the body the seller served, as received; the body is not kept."
    )
    bodyBytes: int | None = Field(description="How many bytes of the body were received.")
    bodyTruncated: bool | None = Field(
        description="True when the bytes received are not the whole body (cut at the size cap or broken off)."
    )
    contentType: str | None = Field(
        default=None, pattern=MEDIA_TYPE_PATTERN, description="The body's media type, type/subtype only."
    )
    paymentResponse: str | None = Field(
        description="The seller's PAYMENT-RESPONSE header as received (bounded, base64 only): its claim, "
        "never proof of settlement, which comes only from the chain (transactionHash)."
    )


class ListPaymentsResult(BaseModel):
    agentId: str
    payments: list[PaymentItem]


def payment_item(intent: PaymentIntent) -> PaymentItem:
    return PaymentItem(
        intentId=intent.id,
        status=intent.status,
        amountUsd=usd(intent.amount_atomic),
        network=intent.network,
        asset="USDC",
        host=intent.host,
        transactionHash=intent.tx_hash if intent.status == IntentStatus.SETTLED else None,
        createdAt=timestamp(intent.created_at),
        sentBy=intent.sent_by,
        termsSha256=intent.terms_sha256,
        bodySha256=intent.body_sha256,
        bodyBytes=intent.body_bytes,
        bodyTruncated=intent.body_truncated,
        contentType=intent.content_type,
        paymentResponse=agent_visible_header(intent.payment_response),
    )


# The settlement header's only form (base64 of JSON): what reaches the agent outside the fence.
_BASE64 = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")


def agent_visible_header(value: str | None) -> str | None:
    """The kept settlement header as the agent sees it: only in the base64 grammar the header is
    written in, so a seller's words never reach the agent unfenced; anything else is null (the
    admin API shows it as received)."""
    return value if value is not None and _BASE64.match(value) else None


def payments_list(agent_id: str, intents: list[PaymentIntent]) -> dict[str, Any]:
    return _dump(ListPaymentsResult(agentId=agent_id, payments=[payment_item(row) for row in intents]))


class ReportReceiptResult(BaseModel):
    intentId: str
    idempotencyKey: str
    status: IntentStatus
    receipt: Receipt
    paymentResponse: str | None = Field(
        description="The header as kept (base64 only, else null): a claim, never proof of settlement."
    )


def receipt_reported(intent: PaymentIntent) -> dict[str, Any]:
    return _dump(
        ReportReceiptResult(
            intentId=intent.id,
            idempotencyKey=intent.idempotency_key,
            status=intent.status,
            receipt=Receipt(
                state=receipt_state(intent).value,
                txHash=intent.tx_hash if intent.status == IntentStatus.SETTLED else None,
            ),
            paymentResponse=agent_visible_header(intent.payment_response),
        )
    )
