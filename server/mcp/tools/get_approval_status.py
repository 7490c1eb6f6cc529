"""get_approval_status: whether a human decided on a payment held for approval. Read-only.

An agent sees only its own agent's approvals; any other id is approval_not_found.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import WithJsonSchema
from sqlmodel import Session

from auth.principal import Principal
from auth.scopes import Scope
from server.approvals import service as approvals
from server.approvals.errors import ApprovalNotFound
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import approvals as schema
from server.mcp.schemas.approvals import ApprovalStatusResult
from server.payments import decisions
from server.services import Services
from server.vocabulary import ApprovalStatus

DESCRIPTION = (
    "Tell whether a human decided on a payment that returned pending_approval: pending, approved, "
    "denied or expired. Once approved, call fetch_paid again with the same url, method, headers, "
    "body and idempotencyKey before expiresAt; intentId is set once the approved payment was made."
)

ApprovalId = Annotated[
    Any, WithJsonSchema({"type": "string", "maxLength": 40, "description": "From a pending_approval result."})
]


def _approval_status(
    session: Session, principal: Principal, approval_id: str, now: datetime
) -> dict[str, Any]:
    """The approval as its agent may see it. One approved but closed when the agent was disabled
    can no longer pay: it reads as denied, as a pending one denied then does."""
    approval = approvals.get(session, principal, approval_id)
    view = approvals.agent_view(approval, now)
    if view.status == ApprovalStatus.APPROVED and decisions.ended_by_disabling(
        session, principal, among=[approval]
    ):
        view = replace(view, status=ApprovalStatus.DENIED)
    return schema.approval_status(view)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="get_approval_status",
        title="Approval status",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def get_approval_status(
        ctx: Context, approvalId: ApprovalId = None
    ) -> Annotated[CallToolResult, ApprovalStatusResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_READ)
            if not isinstance(approvalId, str) or not approvalId or len(approvalId) > 40:
                raise ApprovalNotFound()
            status = await services.db.reading(_approval_status, principal, approvalId, services.clock.now())
            return ok_result(status)
        except Exception as exc:
            return to_tool_error(exc, tool="get_approval_status")
