"""The approvals domain's errors: stable codes, fixed messages."""

from __future__ import annotations

from server.kit.errors import PaywardenError


class ApprovalNotFound(PaywardenError):
    code = "approval_not_found"
    message = "No approval with that id for this agent."


class ApprovalDenied(PaywardenError):
    code = "approval_denied"
    message = "A human denied this payment, so nothing was paid. Do not retry it."


class ApprovalExpired(PaywardenError):
    code = "approval_expired"
    message = (
        "The approval expired, so nothing was paid. Call fetch_paid without idempotencyKey to ask again."
    )


class ApprovalConsumed(PaywardenError):
    code = "approval_consumed"
    message = "That approval was already used for a payment. Check list_payments."


class ApprovalQueueFull(PaywardenError):
    code = "approval_queue_full"
    message = "Too many payments are waiting for approval, so nothing was paid. Retry later."


class ApprovalNotPending(PaywardenError):
    code = "approval_not_pending"
    message = "That approval is no longer waiting for a decision. See status."


class Forbidden(PaywardenError):
    code = "forbidden"
    message = "Only a member with role owner, admin or approver can decide approvals."
