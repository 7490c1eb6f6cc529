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


class InvalidPolicyChange(PaywardenError):
    code = "invalid_policy_change"
    message = "The policy change was not asked for. See reason and fields; nothing changed."


class PolicyChangeQueueFull(PaywardenError):
    code = "policy_change_queue_full"
    message = (
        "This agent already has the most policy changes waiting for a person (see max). Wait for a "
        "decision, or for one to expire, before asking again; nothing changed."
    )


class PolicyChangeNotFound(PaywardenError):
    code = "policy_change_not_found"
    message = "No policy change request with that id for this agent."


class PolicyChangeNotPending(PaywardenError):
    code = "policy_change_not_pending"
    message = "That policy change is no longer waiting for a decision. See status."


class PolicyChangeForbidden(PaywardenError):
    code = "policy_change_forbidden"
    message = (
        "Only an owner or admin of the organisation may approve or reject a change to an agent's policy."
    )


class PolicyChangeOutdated(PaywardenError):
    code = "policy_change_outdated"
    message = (
        "This change no longer gives the agent more room: its policy or a rule the change names was "
        "changed since the agent asked. It can only be rejected; nothing was changed."
    )


class PolicyChangedMeanwhile(PaywardenError):
    code = "policy_changed_meanwhile"
    message = (
        "The agent's policy or rules changed while this page was open. Load the page again, check "
        "the change, then decide; nothing was changed."
    )


class PolicyChangeAltered(PaywardenError):
    code = "policy_change_altered"
    message = (
        "This request's stored change no longer matches the change the agent asked for, so it cannot "
        "be approved. Reject it, and check who can write to the database."
    )
