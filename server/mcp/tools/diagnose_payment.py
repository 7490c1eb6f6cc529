"""diagnose_payment: why paying a URL fails, and what to do, without paying. Read-only."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations

from auth.scopes import Scope
from server.mcp.arguments import ABSENT, Headers, MaxAmountUsd, Method, RequestBody, Url, text_or_none
from server.mcp.content import ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import diagnosis as schema
from server.mcp.schemas.diagnosis import DiagnosisResult
from server.payments.inputs import validate_fetch_paid
from server.services import Services

DESCRIPTION = (
    "Explain why paying a URL fails, without paying: the cause in a sentence and what to do, the "
    "error fetch_paid would return (cause.fetchPaidError), warnings, the seller's payment options "
    "and whether Paywarden can pay each, this agent's wallet balance, the rules that would refuse the "
    "payment, and a Markdown issue report to give a person. Call it when fetch_paid fails with "
    "invalid_payment_required, no_payable_entry, resource_mismatch, insufficient_funds or "
    "payment_rejected_by_seller. It requests the URL once without payment, like fetch_paid's first "
    "request, and never signs, pays or changes the budget."
)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="diagnose_payment",
        title="Why does paying this URL fail?",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
        ),
    )
    async def diagnose_payment(
        ctx: Context,
        url: Url = None,
        method: Method = None,
        headers: Headers = None,
        body: RequestBody = ABSENT,
        maxAmountUsd: MaxAmountUsd = None,
    ) -> Annotated[CallToolResult, DiagnosisResult]:
        try:
            principal = principal_for(ctx, Scope.CATALOG_READ)
            request = validate_fetch_paid(
                {
                    "url": url,
                    "method": method,
                    "headers": headers,
                    "body": text_or_none(body),
                    "maxAmountUsd": maxAmountUsd,
                },
                bearer=bearer_for(ctx),
                public_host=services.settings.public_host,
                allow_private_hosts=services.settings.allow_private_hosts,
            )
            return ok_result(schema.diagnosis(await services.diagnoses.diagnose(principal, request)))
        except Exception as exc:
            return to_tool_error(exc, tool="diagnose_payment")
