"""The one error type domains raise: a stable code, a fixed message, and validated extra fields.

Each error code is exactly one subclass of `PaywardenError`, declared at the top of its domain's
`errors` module, with its message fixed on the class: no instance can change either. `invalid_input`
is the one code with many causes: its `reason` is an `InputReason`, and each reason has its own
fixed sentence. One mapper (server/mcp/errors.py) turns errors into tool errors; the CLI prints them
as one line. Messages are written by us, never copied from a seller or a library.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, ClassVar


class PaywardenError(Exception):
    code: ClassVar[str] = "internal_error"
    message: ClassVar[str] = "Unexpected error in the server."

    def __init__(self, **extra: Any) -> None:
        # Read-only: a renderer that wants other fields builds its own document.
        self.extra: Mapping[str, Any] = MappingProxyType({k: v for k, v in extra.items() if v is not None})
        super().__init__(f"{self.code}: {self.describe()}")

    def describe(self) -> str:
        """The sentence shown with the code."""
        return self.message

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.describe(), **self.extra}


class InputReason(StrEnum):
    """Why an input was refused: the `reason` of `invalid_input`, each with one fixed sentence."""

    INVALID_URL = "invalid_url"
    HTTPS_REQUIRED = "https_required"
    URL_CREDENTIALS = "url_credentials"
    PAYWARDEN_API_URL = "paywarden_api_url"
    INVALID_METHOD = "invalid_method"
    METHOD_NOT_QUOTABLE = "method_not_quotable"
    INVALID_BODY = "invalid_body"
    BODY_NOT_ALLOWED = "body_not_allowed"
    BODY_TOO_LARGE = "body_too_large"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    INVALID_MAX_AMOUNT = "invalid_max_amount"
    INVALID_ORIGIN = "invalid_origin"
    CONTAINS_CREDENTIAL = "contains_credential"
    INVALID_HEADER = "invalid_header"
    TOO_MANY_HEADERS = "too_many_headers"
    RESERVED_HEADER = "reserved_header"
    INVALID_LIMIT = "invalid_limit"
    INVALID_STATUS = "invalid_status"
    INVALID_NAME = "invalid_name"
    INVALID_EMAIL = "invalid_email"
    INVALID_ROLE = "invalid_role"
    INVALID_NETWORK = "invalid_network"
    OUTSIDE_ORGANISATION = "outside_organisation"
    INVALID_APPROVAL_TTL = "invalid_approval_ttl"
    INVALID_CIRCUIT_THRESHOLD = "invalid_circuit_threshold"
    INVALID_WEBHOOK_URL = "invalid_webhook_url"
    INVALID_AUDIT_FILTER = "invalid_audit_filter"
    INVALID_TTL = "invalid_ttl"
    ADMIN_SCOPE_NOT_GRANTABLE = "admin_scope_not_grantable"
    INVALID_SCOPE = "invalid_scope"
    INVALID_HOST = "invalid_host"
    URL_NOT_ON_HOST = "url_not_on_host"
    INVALID_CATEGORY = "invalid_category"
    INVALID_PAY_TO = "invalid_pay_to"
    INVALID_AMOUNT = "invalid_amount"
    INVALID_QUERY = "invalid_query"
    INVALID_SUMMARY = "invalid_summary"
    INVALID_WALLET = "invalid_wallet"
    INVALID_APPROVAL_STATE = "invalid_approval_state"
    APPROVAL_STATE_MISMATCH = "approval_state_mismatch"
    INVALID_DECISION = "invalid_decision"
    INVALID_NOTE = "invalid_note"
    INVALID_X402_VERSION = "invalid_x402_version"
    INVALID_ACCEPTS = "invalid_accepts"
    INVALID_RESOURCE = "invalid_resource"
    INVALID_PAYMENT_RESPONSE = "invalid_payment_response"
    PAYMENT_REFERENCE = "payment_reference"

    @property
    def sentence(self) -> str:
        return _SENTENCES.get(self, InvalidInput.message)


_SENTENCES: dict[InputReason, str] = {
    InputReason.INVALID_URL: (
        "The URL is not a valid absolute URL of at most 2048 characters, or it is spelled in a way "
        "servers read differently (urlProblem says how), so nothing was sent."
    ),
    InputReason.HTTPS_REQUIRED: "The URL must be https://.",
    InputReason.INVALID_DECISION: "The decision must be approve or deny (reject, for a policy change).",
    InputReason.INVALID_NOTE: (
        "note must be 1 to 280 characters of plain text (line breaks allowed; no control or invisible "
        "formatting characters): say in a sentence why the agent needs this change."
    ),
    InputReason.URL_CREDENTIALS: "The URL carries a user name or password.",
    InputReason.PAYWARDEN_API_URL: "The URL is Paywarden itself.",
    InputReason.INVALID_METHOD: "The method must be GET, HEAD, POST, PUT, PATCH or DELETE.",
    InputReason.METHOD_NOT_QUOTABLE: (
        "A quote only ever sends GET or HEAD, so nothing was sent. Use fetch_paid for other methods."
    ),
    InputReason.INVALID_BODY: "The body must be a string.",
    InputReason.BODY_NOT_ALLOWED: "A body is not allowed with GET or HEAD.",
    InputReason.BODY_TOO_LARGE: "The body is larger than 256 KB.",
    InputReason.INVALID_IDEMPOTENCY_KEY: (
        "The idempotency key must be 8 to 128 letters, digits, '.', '_', ':' or '-'."
    ),
    InputReason.INVALID_MAX_AMOUNT: "maxAmountUsd must be a non-negative USD amount.",
    InputReason.INVALID_ORIGIN: "origin must be user, web or agent.",
    InputReason.CONTAINS_CREDENTIAL: "The input contains a credential, so nothing was sent.",
    InputReason.INVALID_HEADER: "A header name or value is not valid.",
    InputReason.TOO_MANY_HEADERS: "At most 32 headers.",
    InputReason.RESERVED_HEADER: "That header cannot be set.",
    InputReason.INVALID_LIMIT: (
        "limit must be a whole number in the tool's range: 1 to 50 for list_payments, 1 to 10 for "
        "search_paid_apis."
    ),
    InputReason.INVALID_STATUS: "status must be one of the payment statuses.",
    InputReason.INVALID_NAME: "Names are 1 to 120 letters, digits, spaces, dots, underscores or dashes.",
    InputReason.INVALID_EMAIL: "The email address is not valid.",
    InputReason.INVALID_ROLE: "The role must be one of owner, admin, approver, viewer.",
    InputReason.INVALID_NETWORK: "The network must be one of eip155:8453, eip155:84532.",
    InputReason.OUTSIDE_ORGANISATION: "The team and member must belong to the agent's organisation.",
    InputReason.INVALID_APPROVAL_TTL: (
        "The approval TTL must be between 300 seconds (5 minutes) and 86400 (24 hours)."
    ),
    InputReason.INVALID_CIRCUIT_THRESHOLD: (
        "The seller circuit opens after 1 to 100 failures within 1 to 720 hours (30 days)."
    ),
    InputReason.INVALID_WEBHOOK_URL: (
        "The Slack webhook must be an https://hooks.slack.com/services/... URL, without spaces."
    ),
    InputReason.INVALID_AUDIT_FILTER: (
        "The audit log is filtered by a kind such as member.disabled, an agent, a member, and dates "
        "written YYYY-MM-DD."
    ),
    InputReason.INVALID_TTL: "The TTL must be between 60 and 31622400 seconds.",
    InputReason.ADMIN_SCOPE_NOT_GRANTABLE: "The admin scope is never granted to an agent token.",
    InputReason.INVALID_SCOPE: "A scope is unknown, or none was given.",
    InputReason.INVALID_HOST: "The host is not a valid host name.",
    InputReason.URL_NOT_ON_HOST: "The example URL must be an http(s) URL on the entry's host.",
    InputReason.INVALID_CATEGORY: "A category is 1 to 40 lower-case letters, digits or dashes.",
    InputReason.INVALID_PAY_TO: "A payee must be 0x and 40 hex digits.",
    InputReason.INVALID_AMOUNT: "The amount must be a non-negative USD amount with at most 6 decimals.",
    InputReason.INVALID_QUERY: "query must be a string of 1 to 200 characters.",
    InputReason.INVALID_SUMMARY: "A summary is at most 500 characters of plain text on one line.",
    InputReason.INVALID_WALLET: "The wallet must be an address: 0x and 40 hex digits.",
    InputReason.INVALID_APPROVAL_STATE: (
        "The requestState is not one this server issued to this agent for this tool, or it expired. "
        "Call the tool again without it."
    ),
    InputReason.INVALID_X402_VERSION: "x402Version must be 1 or 2, as the 402 said.",
    InputReason.INVALID_ACCEPTS: (
        "accepts must be the 402's list of 1 to 64 offers (JSON objects) as received, at most 64 KiB."
    ),
    InputReason.INVALID_RESOURCE: (
        "resource must be the x402 v2 402's resource object with its url, as received; an x402 v1 402 "
        "has none."
    ),
    InputReason.INVALID_PAYMENT_RESPONSE: (
        "paymentResponse must be the seller's PAYMENT-RESPONSE header as received: 1 to 4096 printable "
        "characters."
    ),
    InputReason.PAYMENT_REFERENCE: "Name the payment by exactly one of idempotencyKey or intentId.",
    InputReason.APPROVAL_STATE_MISMATCH: (
        "The retry's arguments differ from the call that asked for approval. Retry with exactly the same "
        "arguments, or call the tool without requestState to start a new purchase."
    ),
}


class InvalidInput(PaywardenError):
    code = "invalid_input"
    message = "The input is invalid. See reason."

    def __init__(self, reason: InputReason, **extra: Any) -> None:
        self.reason = reason
        super().__init__(reason=str(reason), **extra)

    def describe(self) -> str:
        return self.reason.sentence


class NotFound(PaywardenError):
    code = "not_found"
    message = "The resource was not found."
