"""Read who is calling from the MCP request context, and enforce per-tool scopes."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from auth.principal import Principal
from auth.scopes import Scope
from server.mcp.bearer import BEARER_KEY, PRINCIPAL_KEY
from server.mcp.errors import InsufficientScope, Unauthorized


def _scope(ctx: Context[Any, Any]) -> dict[str, Any]:
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    return scope if isinstance(scope, dict) else {}


def principal_for(ctx: Context[Any, Any], scope_needed: Scope) -> Principal:
    principal = _scope(ctx).get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal) or principal.agent_id is None:
        raise Unauthorized()
    if not principal.has(scope_needed):
        raise InsufficientScope(scope=scope_needed)
    return principal


def bearer_for(ctx: Context[Any, Any]) -> str | None:
    value = _scope(ctx).get(BEARER_KEY)
    return value if isinstance(value, str) else None
