"""quote_payment: the policy's decision and the price for a URL, without paying. Read-only.

It requests the URL once, like fetch_paid would, but only with GET or HEAD, and signs, reserves and
records nothing: a token with payments:read alone can never make a seller change anything.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations

from auth.scopes import Scope
from server.mcp.arguments import Headers, MaxAmountUsd, QuoteBody, QuoteMethod, Url
from server.mcp.content import ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import quotes as schema
from server.mcp.schemas.quotes import QuoteResult
from server.payments.inputs import validate_quote_payment
from server.services import Services

DESCRIPTION = (
    "Say what fetch_paid would do with a URL, without paying: would_pay, would_need_approval (with "
    "the reason a human must approve), would_deny (with the policy's reasons) or no_payment_needed, "
    "with the price, network and payee the seller asks for. It requests the URL once, like "
    "fetch_paid, but only with GET or HEAD (any other method is refused before anything is sent), "
    "and signs, reserves and records nothing; a real payment decides again."
)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="quote_payment",
        title="What would paying this URL do?",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
        ),
    )
    async def quote_payment(
        ctx: Context,
        url: Url = None,
        method: QuoteMethod = None,
        headers: Headers = None,
        body: QuoteBody = None,
        maxAmountUsd: MaxAmountUsd = None,
    ) -> Annotated[CallToolResult, QuoteResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_READ)
            request = validate_quote_payment(
                {
                    "url": url,
                    "method": method,
                    "headers": headers,
                    "body": body,
                    "maxAmountUsd": maxAmountUsd,
                },
                bearer=bearer_for(ctx),
                public_host=services.settings.public_host,
                allow_private_hosts=services.settings.allow_private_hosts,
            )
            return ok_result(schema.quote(await services.quotes.quote(principal, request)))
        except Exception as exc:
            return to_tool_error(exc, tool="quote_payment")
