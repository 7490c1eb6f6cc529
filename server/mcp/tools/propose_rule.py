"""propose_rule: add a spending rule that only restricts this agent, when the user asks for it in
the conversation ("no more than 2 USD a day on api.example.com").

Not read-only, but it can never widen what the agent may pay: a limit or a deny on this agent
only, in force at once, never asking a human for anything. No tool can change, extend or remove a
rule; only a person can.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import WithJsonSchema
from sqlmodel import Session

from auth.principal import Principal
from auth.scopes import Scope
from server.mcp.arguments import USD_PATTERN
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas.rules import ProposeRuleResult
from server.policy.proposals import (
    DEFAULT_EXPIRES_IN_HOURS,
    MAX_EXPIRES_IN_HOURS,
    Proposal,
    parse_proposal,
)
from server.policy.rulebook import RuleRejected, propose_chat_rule
from server.policy.rules import RuleError
from server.services import Services
from server.tenancy.service import get_agent

DESCRIPTION = (
    "Add a spending rule that only restricts this agent, when the user asks for one in the "
    "conversation: a limit (at most limitUsd per day, week or month, optionally only for a host or "
    "path prefix) or a deny (no payments to a host or path prefix). The rule is in force at once, "
    "for this agent only, and can never allow more than the policy already does. At most 10 chat "
    "rules are in force at once and 20 can be proposed per hour; an identical rule is not added "
    "twice. Only a person can change or remove a rule."
)
Kind = Annotated[Any, WithJsonSchema({"type": "string", "enum": ["limit", "deny"]})]
LimitUsd = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": USD_PATTERN,
            "description": 'For a limit: the most to spend in the window, e.g. "2".',
        }
    ),
]
Window = Annotated[
    Any, WithJsonSchema({"type": "string", "enum": ["day", "week", "month"], "default": "day"})
]
Host = Annotated[
    Any,
    WithJsonSchema(
        {"type": "string", "description": "Only payments to this host (or *.domain for subdomains)."}
    ),
]
PathPrefix = Annotated[
    Any, WithJsonSchema({"type": "string", "description": "Only payments whose path starts with this."})
]
ExpiresInHours = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_EXPIRES_IN_HOURS,
            "default": DEFAULT_EXPIRES_IN_HOURS,
            "description": "How long the rule stays in force.",
        }
    ),
]


def _propose(
    session: Session, principal: Principal, *, agent_id: str, proposal: Proposal, now: datetime
) -> ProposeRuleResult:
    """The agent's proposal, added to its own rules (or the same rule it already proposed)."""
    agent = get_agent(session, principal, agent_id)
    rule, added = propose_chat_rule(session, agent=agent, proposal=proposal, actor=principal.actor, now=now)
    return ProposeRuleResult.of(rule, added=added)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="propose_rule",
        title="Add a restricting spending rule",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def propose_rule(
        ctx: Context,
        kind: Kind = None,
        limitUsd: LimitUsd = None,
        window: Window = None,
        host: Host = None,
        pathPrefix: PathPrefix = None,
        expiresInHours: ExpiresInHours = None,
    ) -> Annotated[CallToolResult, ProposeRuleResult]:
        try:
            principal = principal_for(ctx, Scope.RULES_PROPOSE)
            given = {
                "kind": kind,
                "limitUsd": limitUsd,
                "window": window,
                "host": host,
                "pathPrefix": pathPrefix,
                "expiresInHours": expiresInHours,
            }
            try:
                proposal = parse_proposal({name: value for name, value in given.items() if value is not None})
            except RuleError as exc:
                raise RuleRejected.from_error(exc) from exc
            assert principal.agent_id is not None
            result = await services.db.writing(
                _propose, principal, agent_id=principal.agent_id, proposal=proposal, now=services.clock.now()
            )
            return ok_result(result.model_dump(mode="json"))
        except Exception as exc:
            return to_tool_error(exc, tool="propose_rule")
