"""get_policy_change_status: what became of a policy change this agent asked for. Read-only.

An agent sees only its own requests; any other id is policy_change_not_found.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import WithJsonSchema

from auth.scopes import Scope
from server.approvals.errors import PolicyChangeNotFound
from server.approvals.policy_changes import request_status
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import policy_changes as schema
from server.mcp.schemas.policy_changes import PolicyChangeStatusResult
from server.services import Services

DESCRIPTION = (
    "Tell whether a person decided on a policy change this agent asked for with "
    "request_policy_change: pending, approved (the change is in force: retry what was refused), "
    "rejected or expired (nothing changed)."
)

RequestId = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "maxLength": 40, "description": "From a request_policy_change result."}
    ),
]


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="get_policy_change_status",
        title="Policy change request status",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def get_policy_change_status(
        ctx: Context, requestId: RequestId = None
    ) -> Annotated[CallToolResult, PolicyChangeStatusResult]:
        try:
            principal = principal_for(ctx, Scope.POLICY_REQUEST)
            if not isinstance(requestId, str) or not requestId:
                raise PolicyChangeNotFound()
            view = await services.db.reading(request_status, principal, requestId, now=services.clock.now())
        except Exception as exc:
            return to_tool_error(exc, tool="get_policy_change_status")
        structured = schema.status(view, public_url=services.settings.public_url)
        return ok_result(structured, fenced=[schema.note_block(view.request)])
