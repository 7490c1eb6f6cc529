"""fetch_paid: request a URL on an allowed host and, if it answers 402, pay it under the policy.

The only tool that can spend money: not read-only, open-world.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, WithJsonSchema

from auth.scopes import Scope
from server.kit.errors import PaywardenError
from server.mcp.content import fence, ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.payments.inputs import MAX_BODY_BYTES, METHODS, ORIGINS, validate_fetch_paid
from server.payments.results import Body, FreeOutcome, PaidOutcome, PendingOutcome
from server.services import Services

DESCRIPTION = (
    "Request a URL on one of this agent's allowed hosts. If it answers HTTP 402 with an x402 "
    "challenge, pay it in USDC under the agent's spending policy and return the paid response. "
    "Returns status ok (no payment needed), paid, or pending_approval (a human must approve first: "
    "show the user approvalUrl, poll get_approval_status, then call again with the same url, method, "
    "headers, body and idempotencyKey); anything else is an error with a stable code. The response "
    "body is untrusted third-party content returned in a separate, fenced block. Pass "
    "idempotencyKey only to retry a purchase after pending_approval or payment_outcome_unknown: "
    "the same key never pays twice."
)

Url = Annotated[
    Any,
    WithJsonSchema({"type": "string", "maxLength": 2048, "description": "https:// URL on an allowed host."}),
]
Method = Annotated[Any, WithJsonSchema({"type": "string", "enum": list(METHODS), "default": "GET"})]
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
RequestBody = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "maxLength": MAX_BODY_BYTES, "description": "Not allowed with GET or HEAD."}
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
MaxAmountUsd = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": ["string", "number"],
            "description": 'Refuse to pay more than this many USD for this call, e.g. "0.05".',
        }
    ),
]
Origin = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(ORIGINS),
            "description": "Who asked for this request; recorded for audit only.",
        }
    ),
]


class BodyMeta(BaseModel):
    untrusted: Literal[True]
    contentType: str
    encoding: Literal["utf-8", "base64"]
    bytes: int
    truncated: bool


class Receipt(BaseModel):
    state: Literal["settled", "pending", "failed", "unknown"]
    txHash: str | None


class FetchPaidResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: Literal["ok", "paid", "pending_approval"]
    httpStatus: int | None = None
    host: str
    body: BodyMeta | None = None
    redirectNotFollowed: bool | None = None
    intentId: str | None = None
    idempotencyKey: str | None = None
    replayed: bool | None = None
    mode: Literal["server_signed", "client_signs"] | None = None
    amountUsd: str | None = None
    network: str | None = None
    payTo: str | None = None
    receipt: Receipt | None = None
    bodyError: str | None = None
    approvalId: str | None = None
    approvalUrl: str | None = None
    reason: str | None = None
    thresholdUsd: str | None = None
    expiresAt: str | None = None


def _body_block(body: Body, host: str) -> str:
    return fence(body.text, what="response body", host=host, encoding=body.encoding)


def render_free(outcome: FreeOutcome) -> CallToolResult:
    structured: dict[str, Any] = {
        "status": "ok",
        "httpStatus": outcome.http_status,
        "host": outcome.host,
        "body": outcome.body.metadata(),
    }
    if outcome.redirect_not_followed:
        structured["redirectNotFollowed"] = True
    return ok_result(structured, fenced=[_body_block(outcome.body, outcome.host)])


def render_paid(outcome: PaidOutcome) -> CallToolResult:
    intent = outcome.intent
    structured: dict[str, Any] = {
        "status": "paid",
        "httpStatus": outcome.http_status,
        "host": intent.host,
        "intentId": intent.id,
        "idempotencyKey": intent.idempotency_key,
        "replayed": outcome.replayed,
        "mode": "server_signed",
        "amountUsd": outcome.amount_usd,
        "network": intent.network,
        "payTo": intent.pay_to,
        "receipt": {"state": outcome.receipt_state, "txHash": intent.tx_hash},
        "body": outcome.body.metadata() if outcome.body else None,
    }
    if outcome.body_error:
        structured["bodyError"] = outcome.body_error
    fenced = [_body_block(outcome.body, intent.host)] if outcome.body else []
    return ok_result(structured, fenced=fenced)


def register(mcp: MCPServer, services: Services) -> None:
    @mcp.tool(
        name="fetch_paid",
        title="Fetch a URL, paying for it if it asks",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
        ),
    )
    async def fetch_paid(
        ctx: Context,
        url: Url = None,
        method: Method = None,
        headers: Headers = None,
        body: RequestBody = None,
        idempotencyKey: IdempotencyKey = None,
        maxAmountUsd: MaxAmountUsd = None,
        origin: Origin = None,
    ) -> Annotated[CallToolResult, FetchPaidResult]:
        host: str | None = None
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_WRITE)
            request = validate_fetch_paid(
                {
                    "url": url,
                    "method": method,
                    "headers": headers,
                    "body": body,
                    "idempotencyKey": idempotencyKey,
                    "maxAmountUsd": maxAmountUsd,
                    "origin": origin,
                },
                bearer=bearer_for(ctx),
                public_host=services.settings.public_host,
                allow_private_hosts=services.settings.allow_private_hosts,
            )
            host = request.host
            outcome = await services.purchases.fetch_paid(principal, request)
        except (PaywardenError, Exception) as exc:
            return to_tool_error(exc, tool="fetch_paid", host=host)
        if isinstance(outcome, FreeOutcome):
            return render_free(outcome)
        if isinstance(outcome, PendingOutcome):
            return ok_result(outcome.fields())
        return render_paid(outcome)
