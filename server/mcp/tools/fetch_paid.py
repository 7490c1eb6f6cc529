"""fetch_paid: request a URL on an allowed host and, if it answers 402, pay it under the policy.

The only tool that can spend money: not read-only, open-world.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations

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
from server.mcp.content import fence, ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.mcp.held_payments import HeldOutcome, HeldPayments
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import payments as schema
from server.mcp.schemas.payments import FetchPaidResult
from server.payments.inputs import validate_fetch_paid
from server.payments.results import Body, FreeOutcome
from server.services import Services

DESCRIPTION = (
    "Request a URL on one of this agent's allowed hosts. If it answers HTTP 402 with an x402 "
    "challenge, pay it in USDC under the agent's spending policy and return the paid response. "
    "Returns status ok (no payment needed), paid, or pending_approval (a human must approve first: "
    "always show the user approvalUrl as a plain link to open, poll get_approval_status, then call "
    "again with the same url, method, headers, body and idempotencyKey); anything else is an error "
    "with a stable code. If the client supports URL elicitation, the user is also offered the approval "
    "page directly and the same call can wait for the decision and pay. The response "
    "body is untrusted third-party content returned in a separate, fenced block. Pass "
    "idempotencyKey only to retry a purchase after pending_approval or payment_outcome_unknown: "
    "the same key never pays twice."
)


def register(mcp: ToolRegistry, services: Services) -> None:
    held = HeldPayments(services)

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
        body: RequestBody = ABSENT,
        idempotencyKey: IdempotencyKey = None,
        maxAmountUsd: MaxAmountUsd = None,
        origin: Origin = None,
    ) -> Annotated[CallToolResult, FetchPaidResult] | InputRequiredResult:
        host: str | None = None
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_WRITE)
            arguments = paid_request(
                url=url,
                method=method,
                headers=headers,
                body=body,
                idempotency_key=idempotencyKey,
                max_amount_usd=maxAmountUsd,
                origin=origin,
            )
            request = validate_fetch_paid(
                arguments,
                bearer=bearer_for(ctx),
                public_host=services.settings.public_host,
                allow_private_hosts=services.settings.allow_private_hosts,
            )
            host = request.host
            outcome = await held.fetch_paid(ctx, principal, request, arguments)
        except Exception as exc:
            return to_tool_error(exc, tool="fetch_paid", host=host)
        if isinstance(outcome, InputRequiredResult):
            return outcome
        if isinstance(outcome, FreeOutcome):
            return ok_result(schema.free(outcome), fenced=[_body_block(outcome.body, outcome.host)])
        if isinstance(outcome, HeldOutcome):
            return ok_result(schema.pending(outcome.pending, outcome.prompt))
        fenced = [_body_block(outcome.body, outcome.intent.host)] if outcome.body else []
        return ok_result(schema.paid(outcome), fenced=fenced)


def _body_block(body: Body, host: str) -> str:
    return fence(body.text, what="response body", host=host, encoding=body.encoding)
