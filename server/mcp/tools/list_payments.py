"""list_payments: the agent's most recent payments, newest first. Read-only."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import WithJsonSchema
from sqlmodel import Session

from auth.principal import Principal
from auth.scopes import Scope
from server.kit.errors import InputReason, InvalidInput
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import payments as schema
from server.mcp.schemas.payments import ListPaymentsResult
from server.payments import ledger
from server.services import Services
from server.vocabulary import IntentStatus

DESCRIPTION = (
    "List this agent's most recent payments, newest first: status, amount, network, the host that "
    "was paid (not the full URL), the transaction hash once settled, and each payment's receipt: "
    "digests of the terms paid and of the body served (never the body) and the seller's settlement "
    "header as received."
)
MAX_LIMIT = 50
DEFAULT_LIMIT = 10

Limit = Annotated[
    Any, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT})
]
Status = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "enum": [str(s) for s in IntentStatus], "description": "Only this status."}
    ),
]


def parse(limit: Any, status: Any) -> tuple[int, IntentStatus | None]:
    if limit is None:
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(InputReason.INVALID_LIMIT)
    if status is None:
        return limit, None
    if not isinstance(status, str) or status not in {str(s) for s in IntentStatus}:
        raise InvalidInput(InputReason.INVALID_STATUS)
    return limit, IntentStatus(status)


def _payments_of(
    session: Session, principal: Principal, *, agent_id: str, limit: int, status: IntentStatus | None
) -> dict[str, Any]:
    """The agent's newest payments, newest first."""
    rows = ledger.newest(session, principal, agent_id=agent_id, limit=limit, status=status)
    return schema.payments_list(agent_id, rows)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="list_payments",
        title="Recent payments",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def list_payments(
        ctx: Context, limit: Limit = None, status: Status = None
    ) -> Annotated[CallToolResult, ListPaymentsResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_READ)
            count, only = parse(limit, status)
            assert principal.agent_id is not None
            listed = await services.db.reading(
                _payments_of, principal, agent_id=principal.agent_id, limit=count, status=only
            )
            return ok_result(listed)
        except Exception as exc:
            return to_tool_error(exc, tool="list_payments")
