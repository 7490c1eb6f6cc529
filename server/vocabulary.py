"""The stored vocabulary: every state, kind and role a column holds, as a `StrEnum`.

A `StrEnum` member is its own string, so rows written before these types existed read back the
same, and JSON renders them as plain strings. Columns declare them with `EnumColumn`, which refuses
a value outside the enum on the way in and hands back the enum on the way out.
"""

from __future__ import annotations

from enum import StrEnum

# The networks Paywarden pays on (CAIP-2 ids) and their names.
BASE = "eip155:8453"
BASE_SEPOLIA = "eip155:84532"
SUPPORTED_NETWORKS = {BASE: "Base", BASE_SEPOLIA: "Base Sepolia"}


class IntentStatus(StrEnum):
    """A payment intent's state. See server/payments/states.py for the moves between them."""

    CREATED = "created"  # held for a human: nothing signed, nothing counted
    AUTHORIZED = "authorized"  # the policy allowed it: counted from now on
    SUBMITTED = "submitted"  # the signed payment left for the seller
    SETTLEMENT_PENDING = "settlement_pending"  # the seller served it; settlement not yet seen on-chain
    SETTLED = "settled"  # the transfer was found on-chain
    FAILED = "failed"
    EXPIRED = "expired"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CONSUMED = "consumed"  # approved, and the retry that paid used it
    SUPERSEDED = "superseded"  # a retry met a hold it did not cover: a newer approval replaces it


class PolicyChangeStatus(StrEnum):
    """A policy change an agent asked for (request_policy_change): it changes nothing until a
    member approves it with a passkey."""

    PENDING = "pending"
    APPROVED = "approved"  # a member approved it: the change was made, as that member
    REJECTED = "rejected"  # a member rejected it: nothing changed
    EXPIRED = "expired"  # nobody decided in time: nothing changed


class ApprovalPrompt(StrEnum):
    """What became of offering a held payment's approval page to the person through the MCP client:
    the client's answer to a URL elicitation, or that it could not be asked. Never a decision:
    `accepted` only means the person agreed to open the page."""

    NOT_SUPPORTED = "not_supported"  # the client cannot show a URL elicitation
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"


class NotificationStatus(StrEnum):
    """An announcement of a pending approval (the Slack outbox): sent at most once."""

    PENDING = "pending"  # waiting for its turn (or for room under the organisation's rate limit)
    SENDING = "sending"  # claimed by one process; never claimed again, whatever happens next
    SENT = "sent"
    SUMMARISED = "summarised"  # announced in one message with others (the rate limit was reached)
    SKIPPED = "skipped"  # the approval was decided or lapsed before its turn
    FAILED = "failed"  # the webhook refused it, or the answer never came: not tried again


class HoldReason(StrEnum):
    """Why a payment that passed every rule waits for a person; the first that applies, in order."""

    RULE = "rule"
    CATALOG_NEW_HOST = "catalog_new_host"
    NEW_PAY_TO = "new_pay_to"
    INSTRUCTION_LIKE_DESCRIPTION = "instruction_like_description"
    THRESHOLD = "threshold"


class DenyReason(StrEnum):
    """Why the policy refused a payment, in the order a payment meets them (a denial lists every
    reason that applies, in this order)."""

    HOST_NOT_ALLOWED = "host_not_allowed"
    RESOURCE_HOST_MISMATCH = "resource_host_mismatch"
    NETWORK_NOT_ALLOWED = "network_not_allowed"
    ASSET_NOT_ALLOWED = "asset_not_allowed"
    PAY_TO_DENIED = "pay_to_denied"
    SELLER_NOT_VERIFIED = "seller_not_verified"
    PAY_TO_NOT_VERIFIED = "pay_to_not_verified"
    INVALID_AMOUNT = "invalid_amount"
    AMOUNT_EXCEEDS_PER_TRANSACTION = "amount_exceeds_per_transaction"
    DAILY_CAP_EXCEEDED = "daily_cap_exceeded"
    MEMBER_CAP_EXCEEDED = "member_cap_exceeded"
    RULE_DENIED = "rule_denied"
    RULE_LIMIT_EXCEEDED = "rule_limit_exceeded"
    VELOCITY_TX_EXCEEDED = "velocity_tx_exceeded"
    VELOCITY_USD_EXCEEDED = "velocity_usd_exceeded"
    CHALLENGE_HOST_NOT_ALLOWED = "challenge_host_not_allowed"
    CHALLENGE_PATH_NOT_ALLOWED = "challenge_path_not_allowed"
    CHALLENGE_AMOUNT_EXCEEDED = "challenge_amount_exceeded"


class RuleScope(StrEnum):
    AGENT = "agent"
    TEAM = "team"
    MEMBER = "member"
    ORG = "org"


class RuleKind(StrEnum):
    LIMIT = "limit"
    DENY = "deny"
    HOLD = "hold"


class RuleWindow(StrEnum):
    """UTC calendar windows a limit rule counts spend in."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


class RuleSource(StrEnum):
    ADMIN = "admin"  # set by a person
    CHAT = "chat"  # proposed by an agent from the conversation (restrict-only)
    DEFAULT = "default"  # the weekly rule every new agent gets


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    APPROVER = "approver"
    VIEWER = "viewer"

    @property
    def may_approve(self) -> bool:
        return self != Role.VIEWER


class WalletMode(StrEnum):
    LOCAL_KEY = "local_key"
    CDP = "cdp"


class PaymentSender(StrEnum):
    """Who sends a signed payment to the seller."""

    PAYWARDEN = "paywarden"  # fetch_paid: Paywarden sends it and reads the seller's answer
    AGENT = "agent"  # pay_x402: the agent's own HTTP client sends the header Paywarden handed it


class SweepStatus(StrEnum):
    """A sweep's state: a retired wallet's USDC on one network moving to the agent's current wallet
    (server/payments/sweeps/)."""

    AUTHORIZED = "authorized"  # recorded for the whole balance: nothing signed yet
    SIGNED = "signed"  # the authorisation is signed and kept; Paywarden sent no transaction with it
    SUBMITTED = "submitted"  # a transaction carrying it was signed, kept, then sent
    SETTLED = "settled"  # the transfer was found on-chain, deep enough
    FAILED = "failed"  # closed unsigned, or the chain showed another transfer than the one signed
    EXPIRED = "expired"  # signed, and the chain proved it was never used and never can be


class TokenKind(StrEnum):
    ACCESS = "access"
    REFRESH = "refresh"


class ClientKind(StrEnum):
    """How the authorization server came to know an OAuth client."""

    REGISTERED = "registered"  # dynamic client registration (RFC 7591)
    METADATA_DOCUMENT = "metadata_document"  # its client_id is the URL of its metadata document
    ADMIN = "admin"  # created by an operator for client_credentials, bound to one agent


class ChallengePurpose(StrEnum):
    """What a WebAuthn challenge was issued for: an answer is checked against that purpose only."""

    SIGN_IN = "sign_in"
    ENROLL = "enroll"
    ADD_PASSKEY = "add_passkey"
    APPROVE_PAYMENT = "approve_payment"  # bound to one approval, its payment and a nonce
    DENY_PAYMENT = "deny_payment"
    APPROVE_POLICY_CHANGE = "approve_policy"  # bound to one policy change request, its change and a nonce
    REJECT_POLICY_CHANGE = "reject_policy"


class StepUpAction(StrEnum):
    """What a step-up (a fresh passkey assertion on top of a session) allows."""

    ADD_PASSKEY = "add_passkey"  # once
    SUDO = "sudo"  # widening changes from this session's pages, for PAYWARDEN_SUDO_SECONDS
    CONFIRM_CHANGE = "confirm_change"  # one pending change asked for through the admin API


class PendingChangeKind(StrEnum):
    """A change made with an admin token that widens authority, so waits for a member's passkey."""

    POLICY = "policy"  # a policy change that raises a cap, adds a host or removes a denied one
    NEW_CREDENTIAL = "new_credential"  # an agent token for its MCP endpoint
    ROLE_CHANGE = "role_change"  # a member's role, upward
    INVITE = "invite"  # a new member, and their enrolment link
    RULE_CHANGE = "rule_change"  # a limit rule's limit, upward
    RULE_REMOVAL = "rule_removal"  # a rule no longer in force


class PayToMode(StrEnum):
    PINNED = "pinned"  # the catalog knows the seller's receiving addresses
    ROTATING = "rotating"  # the seller uses a new address each time


class CatalogSource(StrEnum):
    """Where a catalog entry came from."""

    ADMIN = "admin"  # added by an operator
    SEED = "seed"  # imported from a seed file of known public sellers
    BAZAAR = "bazaar"  # imported from an x402 Bazaar discovery endpoint


class SuspensionReason(StrEnum):
    """Why a listed seller is suspended (not listed, not searchable) until an operator resumes it."""

    PAYEE_CHANGED = "payee_changed"  # a pinned seller asked to be paid at an address not pinned
    OPERATOR = "operator"  # an operator suspended it


class FindingKind(StrEnum):
    """What an out-of-policy movement out of an agent's wallet was."""

    UNKNOWN_NONCE = "unknown_nonce"
    PAY_TO_MISMATCH = "pay_to_mismatch"
    AMOUNT_MISMATCH = "amount_mismatch"
    PAYMENT_NOT_SENT = "payment_not_sent"
    SETTLED_AFTER_REFUSAL = "settled_after_refusal"
    TRANSFER_WITHOUT_AUTHORIZATION = "transfer_without_authorization"
    APPROVAL = "approval"


class Origin(StrEnum):
    """Who asked for a fetch_paid request; recorded for audit only."""

    USER = "user"
    WEB = "web"
    AGENT = "agent"
