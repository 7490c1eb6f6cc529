"""report_receipt: the seller's PAYMENT-RESPONSE for a payment the agent sent itself (pay_x402),
kept as received. A claim, never proof: only the chain settles a payment.

Not read-only (it records the header); reporting the same header again changes nothing more.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import WithJsonSchema

from auth.scopes import Scope
from server.mcp.content import ok_result
from server.mcp.context import bearer_for, principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import payments as schema
from server.mcp.schemas.payments import ReportReceiptResult
from server.payments.inputs import validate_report_receipt
from server.services import Services

TOOL = "report_receipt"
DESCRIPTION = (
    "After sending a payment header from pay_x402, hand Paywarden the seller's PAYMENT-RESPONSE (or "
    "X-PAYMENT-RESPONSE) header exactly as received, naming the payment by its idempotencyKey or "
    "intentId. It is kept as the seller's claim; the payment reads settled only once its transfer is "
    "found on-chain, which this call looks for once. Returns the payment's status and receipt."
)

PaymentKey = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": "^[A-Za-z0-9._:-]{8,128}$",
            "description": "The payment's idempotencyKey, from pay_x402 (or give intentId).",
        }
    ),
]
IntentId = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "maxLength": 40, "description": "The payment's intentId, from pay_x402."}
    ),
]
PaymentResponse = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": 4096,
            "description": "The seller's PAYMENT-RESPONSE header, exactly as received.",
        }
    ),
]


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="report_receipt",
        title="Report a seller's settlement header",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def report_receipt(
        ctx: Context,
        paymentResponse: PaymentResponse = None,
        idempotencyKey: PaymentKey = None,
        intentId: IntentId = None,
    ) -> Annotated[CallToolResult, ReportReceiptResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_WRITE)
            report = validate_report_receipt(
                {"paymentResponse": paymentResponse, "idempotencyKey": idempotencyKey, "intentId": intentId},
                bearer=bearer_for(ctx),
            )
            intent = await services.handovers.report_receipt(principal, report)
        except Exception as exc:
            return to_tool_error(exc, tool=TOOL)
        return ok_result(schema.receipt_reported(intent))
