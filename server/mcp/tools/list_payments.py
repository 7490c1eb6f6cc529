"""list_payments: the agent's most recent payments, newest first. Read-only."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, WithJsonSchema

from auth.scopes import Scope
from server.kit.clock import isoformat
from server.kit.errors import InputReason, InvalidInput
from server.kit.money import format_usd
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.models import PaymentIntent
from server.payments.ledger import STATUSES, list_payments
from server.services import Services

DESCRIPTION = (
    "List this agent's most recent payments, newest first: status, amount, network, the host that "
    "was paid (not the full URL) and the transaction hash once settled."
)
MAX_LIMIT = 50
DEFAULT_LIMIT = 10

Limit = Annotated[
    Any, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT})
]
Status = Annotated[
    Any, WithJsonSchema({"type": "string", "enum": list(STATUSES), "description": "Only this status."})
]


class PaymentItem(BaseModel):
    intentId: str
    status: Literal[
        "created", "authorized", "submitted", "settlement_pending", "settled", "failed", "expired"
    ]
    amountUsd: str
    network: str
    asset: str
    host: str
    transactionHash: str | None
    createdAt: str


class ListPaymentsResult(BaseModel):
    agentId: str
    payments: list[PaymentItem]


def item(intent: PaymentIntent) -> dict[str, Any]:
    return {
        "intentId": intent.id,
        "status": intent.status,
        "amountUsd": format_usd(intent.amount_atomic, atomic=True),
        "network": intent.network,
        "asset": "USDC",
        "host": intent.host,
        "transactionHash": intent.tx_hash if intent.status == "settled" else None,
        "createdAt": isoformat(intent.created_at),
    }


def parse(limit: Any, status: Any) -> tuple[int, str | None]:
    if limit is None:
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(InputReason.INVALID_LIMIT)
    if status is not None and status not in STATUSES:
        raise InvalidInput(InputReason.INVALID_STATUS)
    return limit, status


def register(mcp: MCPServer, services: Services) -> None:
    @mcp.tool(
        name="list_payments",
        title="Recent payments",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def list_payments_tool(
        ctx: Context, limit: Limit = None, status: Status = None
    ) -> Annotated[CallToolResult, ListPaymentsResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_READ)
            count, only = parse(limit, status)
            agent_id = principal.agent_id
            assert agent_id is not None

            def read() -> dict[str, Any]:
                with services.db.read() as session:
                    rows = list_payments(session, agent_id=agent_id, limit=count, status=only)
                    return {"agentId": agent_id, "payments": [item(row) for row in rows]}

            return ok_result(await services.db.run(read))
        except Exception as exc:
            return to_tool_error(exc, tool="list_payments")
