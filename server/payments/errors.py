"""The purchase flow's errors: stable codes, fixed messages written here, validated extra fields.

Errors that arise after a payment was signed carry the intent and idempotency key, so the agent
can look the payment up and retry without paying twice.
"""

from __future__ import annotations

from typing import Any

from server.kit.errors import PaywardenError
from server.policy.engine import Decision

MEMBER_CAP_HINT = (
    "The person this agent belongs to reached their daily sub-cap across all their agents, or has none "
    "yet. Do not retry today: a person asks an admin of the organisation to set or raise it."
)
RULE_HINT = (
    "A spending rule named in rules refused this payment. Only a person can change a rule; get_budget "
    "shows what each limit leaves and when it resets."
)


class AgentDisabled(PaywardenError):
    code = "agent_disabled"
    message = "This agent is disabled, so nothing was paid."


class HostNotAllowed(PaywardenError):
    code = "host_not_allowed"
    message = "The URL's host is not one of the agent's allowed hosts, so nothing was sent."


class InvalidPaymentRequired(PaywardenError):
    code = "invalid_payment_required"
    message = "The URL answered 402 without a readable payment challenge, so nothing was paid."


class NoPayableEntry(PaywardenError):
    code = "no_payable_entry"
    message = (
        "No price in the 402 is exact USDC on Base or Base Sepolia with a whole amount, so nothing was paid."
    )


class AmountExceedsMax(PaywardenError):
    code = "amount_exceeds_max"
    message = "The price is over this call's maxAmountUsd, so nothing was paid."


class ResourceMismatch(PaywardenError):
    code = "resource_mismatch"
    message = "The seller asked to be paid for a different host than the one requested, so nothing was paid."


class PolicyDenied(PaywardenError):
    code = "policy_denied"
    message = "The agent's spending policy denied this payment, so nothing was paid. See reasons."

    @staticmethod
    def fields_for(decision: Decision) -> dict[str, Any]:
        """Its extra fields: reasons, versions, the rules behind them and a hint."""
        fields: dict[str, Any] = {"reasons": list(decision.reasons), "policyVersion": decision.policy_version}
        if decision.rules:
            fields["rules"] = list(decision.rules)
            fields["ruleScopes"] = dict(decision.rule_scopes)
        if "member_cap_exceeded" in decision.reasons:
            fields["hint"] = MEMBER_CAP_HINT
        elif {"rule_denied", "rule_limit_exceeded"} & set(decision.reasons):
            fields["hint"] = RULE_HINT
        return fields

    @classmethod
    def of(cls, decision: Decision) -> PolicyDenied:
        return cls(**cls.fields_for(decision))


class WalletNotConfigured(PaywardenError):
    code = "wallet_not_configured"
    message = (
        "The agent has no wallet to sign with, so nothing was paid. An admin must import or connect one."
    )


class WalletChanged(PaywardenError):
    code = "wallet_changed"
    message = (
        "The agent's wallet was rotated while this payment was being prepared, so nothing was signed "
        "or paid. Call fetch_paid again: it pays from the new wallet."
    )


class SigningFailed(PaywardenError):
    code = "signing_failed"
    message = "The wallet could not sign the payment, so nothing was paid."


class IdempotencyKeyReused(PaywardenError):
    code = "idempotency_key_reused"
    message = "That idempotencyKey belongs to a different request, so nothing was paid."


class IntentNotReplayable(PaywardenError):
    code = "intent_not_replayable"
    message = "The payment for that idempotencyKey failed or expired. Omit the key to start a new payment."


class PaymentInProgress(PaywardenError):
    code = "payment_in_progress"
    message = "A payment with this idempotencyKey is still in progress. Retry shortly with the same key."


class SellerFailure(PaywardenError):
    """After paying: the seller did not serve the resource. `seller_reason` is untrusted text."""

    def __init__(self, *, seller_reason: str | None = None, **extra: Any) -> None:
        super().__init__(**extra)
        self.seller_reason = seller_reason


class PaymentRejectedBySeller(SellerFailure):
    code = "payment_rejected_by_seller"
    message = "The seller refused the signed payment and did not serve the resource. It is not retried."


class PaymentNotCompleted(SellerFailure):
    code = "payment_not_completed"
    message = (
        "The signed payment was sent but the seller did not serve the resource. It may still settle: "
        "check list_payments; retrying with the same idempotencyKey never charges twice."
    )


class PaymentOutcomeUnknown(SellerFailure):
    code = "payment_outcome_unknown"
    message = (
        "The signed payment was sent but the seller's answer was lost. Check list_payments; retrying with "
        "the same idempotencyKey never charges twice."
    )


class PaymentIdentifierConflict(SellerFailure):
    code = "payment_identifier_conflict"
    message = (
        "The seller answered that this payment's identifier was already used for a different payment "
        "(409 Conflict) and did not serve the resource. It is not retried; check list_payments."
    )


class ChallengeMismatch(PaywardenError):
    code = "challenge_mismatch"
    message = (
        "The seller's 402 for this request, fetched again by Paywarden, does not name the terms you sent "
        "(mismatch says which), so nothing was signed. Request the URL again and pass its 402 as received."
    )


class ReceiptNotAccepted(PaywardenError):
    code = "receipt_not_accepted"
    message = (
        "Only a payment whose signed header pay_x402 handed to you takes a receipt from you: this one was "
        "sent by Paywarden itself, or never left. Nothing was recorded."
    )


class ControlPlaneUnavailable(PaywardenError):
    code = "control_plane_unavailable"
    message = "The agent's policy or allowed hosts could not be loaded, so nothing was requested."


class InsufficientFunds(PaywardenError):
    code = "insufficient_funds"
    message = "The paying wallet holds less USDC than this payment on its network, so nothing was signed."


class PaymentNotFound(PaywardenError):
    code = "payment_not_found"
    message = "There is no such payment in your organisation."


class IllegalTransition(PaywardenError):
    """A state change the ledger does not allow: a bug, masked as internal_error to the agent."""

    code = "internal_error"
    message = "Unexpected error in the server."


class ApprovalMismatch(PaywardenError):
    code = "approval_mismatch"
    message = (
        "The seller now asks for a different payment (amount, payee, network or resource) than the one "
        "a human approved, so nothing was paid. Call fetch_paid without idempotencyKey to ask again."
    )


# Failure codes of payments whose signed authorisation never left Paywarden: money can only move
# for one of these if the wallet's key is used elsewhere. `never_sent`: authorised, never submitted,
# expired by the reconciler (an intent is marked submitted before its signature leaves).
NEVER_SENT_FAILURES = frozenset(
    {
        "never_sent",
        "signing_failed",
        "sign_refused",
        "cdp_policy_refused",
        "cdp_unavailable",
        "cdp_refused",
        "amount_exceeds_max",
        "seller_unreachable",
        "seller_timeout",
        "private_address_blocked",
        "invalid_input",
    }
)


# Failure codes of payments the seller refused after the signed authorisation reached it: one it
# collects all the same was settled after a refusal.
REFUSED_BY_SELLER = frozenset({"payment_rejected_by_seller", "payment_identifier_conflict"})


class CircuitNotFound(PaywardenError):
    code = "circuit_not_found"
    message = "No seller circuit is open for that host in your organisation."
