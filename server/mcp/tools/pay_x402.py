"""pay_x402: sign a payment for an agent that makes the HTTP request itself, under the same policy as
fetch_paid, and hand it the header to send.

Not read-only (it signs and counts a payment), open-world (it requests the seller's URL again).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import WithJsonSchema

from auth.scopes import Scope
from server.mcp.arguments import (
    ABSENT,
    Headers,
    IdempotencyKey,
    MaxAmountUsd,
    Method,
    Origin,
    RequestBody,
    Url,
    paid_request,
)
from server.mcp.content import ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.mcp.held_payments import HeldOutcome, HeldPayments
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import payments as schema
from server.mcp.schemas.payments import PayX402Result
from server.payments.inputs import validate_pay_x402
from server.services import Services

TOOL = "pay_x402"
DESCRIPTION = (
    "For an agent that makes the HTTP request itself: after a URL answered HTTP 402, pass the same url, "
    "method, headers and body, and the 402's accepts, x402Version and (v2) resource exactly as received. "
    "Paywarden requests the URL again, refuses with challenge_mismatch if the seller's 402 names other "
    "terms, checks the payment against the agent's spending policy like fetch_paid, and returns status "
    "signed with headerName and headerValue: send the same request again with that header, once, before "
    "validBefore. Or pending_approval: a human must approve first (show the user approvalUrl as a plain "
    "link, poll get_approval_status, then call again with the same arguments and idempotencyKey). The "
    "same idempotencyKey returns the same header, never a second payment. Afterwards, report_receipt "
    "hands Paywarden the seller's PAYMENT-RESPONSE header."
)

Accepts = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "object"},
            "minItems": 1,
            "maxItems": 64,
            "description": "The 402's accepts array (its offers), exactly as received.",
        }
    ),
]
X402Version = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "integer",
            "enum": [1, 2],
            "description": "The 402's x402Version: 2 for a PAYMENT-REQUIRED header, 1 for a JSON body.",
        }
    ),
]
ResourceBlock = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "description": "The x402 v2 402's resource object (with its url), as received; omit for v1.",
        }
    ),
]


def register(mcp: ToolRegistry, services: Services) -> None:
    held = HeldPayments(services)

    @mcp.tool(
        name="pay_x402",
        title="Sign a payment for a request the agent sends",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
        ),
    )
    async def pay_x402(
        ctx: Context,
        url: Url = None,
        accepts: Accepts = None,
        x402Version: X402Version = None,
        resource: ResourceBlock = None,
        method: Method = None,
        headers: Headers = None,
        body: RequestBody = ABSENT,
        idempotencyKey: IdempotencyKey = None,
        maxAmountUsd: MaxAmountUsd = None,
        origin: Origin = None,
    ) -> Annotated[CallToolResult, PayX402Result] | InputRequiredResult:
        host: str | None = None
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_WRITE)
            arguments = {
                **paid_request(
                    url=url,
                    method=method,
                    headers=headers,
                    body=body,
                    idempotency_key=idempotencyKey,
                    max_amount_usd=maxAmountUsd,
                    origin=origin,
                ),
                "accepts": accepts,
                "x402Version": x402Version,
                "resource": resource,
            }
            given = validate_pay_x402(
                arguments,
                bearer=bearer_for(ctx),
                public_host=services.settings.public_host,
                allow_private_hosts=services.settings.allow_private_hosts,
            )
            host = given.host
            outcome = await held.pay_x402(ctx, principal, given, arguments)
        except Exception as exc:
            return to_tool_error(exc, tool=TOOL, host=host)
        if isinstance(outcome, InputRequiredResult):
            return outcome
        if isinstance(outcome, HeldOutcome):
            return ok_result(schema.pending(outcome.pending, outcome.prompt, tool=TOOL))
        return ok_result(schema.signed(outcome))
