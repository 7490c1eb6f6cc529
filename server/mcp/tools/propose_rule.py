"""propose_rule: add a spending rule that only restricts this agent, when the user asks for it in
the conversation ("no more than 2 USD a day on api.example.com").

Not read-only, but it can never widen what the agent may pay: a limit or a deny on this agent
only, in force at once, never asking a human for anything. No tool can change, extend or remove a
rule; only a person can.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, WithJsonSchema

from auth.scopes import Scope
from server.kit.clock import isoformat
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.policy.chat_rules import (
    DEFAULT_EXPIRES_IN_HOURS,
    MAX_EXPIRES_IN_HOURS,
    parse_proposal,
)
from server.policy.rule_service import RuleRejected, propose_chat_rule, rule_document
from server.policy.rules import RuleError
from server.services import Services
from server.tenancy.service import find_agent

DESCRIPTION = (
    "Add a spending rule that only restricts this agent, when the user asks for one in the "
    "conversation: a limit (at most limitUsd per day, week or month, optionally only for a host or "
    "path prefix) or a deny (no payments to a host or path prefix). The rule is in force at once, "
    "for this agent only, and can never allow more than the policy already does. At most 10 chat "
    "rules are in force at once and 20 can be proposed per hour; an identical rule is not added "
    "twice. Only a person can change or remove a rule."
)
ADDED = "The rule is in force for this agent only. Only a person can change or remove it."
ALREADY = "An identical rule is already in force for this agent, so nothing was added."

Kind = Annotated[Any, WithJsonSchema({"type": "string", "enum": ["limit", "deny"]})]
LimitUsd = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": ["string", "number"],
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


class ProposeRuleResult(BaseModel):
    ruleId: str
    added: bool
    kind: Literal["limit", "deny"]
    limitUsd: str | None
    window: Literal["day", "week", "month"] | None
    host: str | None
    pathPrefix: str | None
    expiresAt: str | None  # None only when the identical rule in force was set by a person
    message: str


def register(mcp: MCPServer, services: Services) -> None:
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
                raise RuleRejected(reason=exc.reason, fields=list(exc.fields)) from exc
            agent_id = principal.agent_id
            assert agent_id is not None

            def write() -> dict[str, Any]:
                with services.db.write() as session:
                    agent = find_agent(session, agent_id, org_id=principal.org_id)
                    rule, added = propose_chat_rule(
                        session,
                        agent=agent,
                        proposal=proposal,
                        actor=principal.actor,
                        now=services.clock.now(),
                    )
                document = rule_document(rule)
                return {
                    "ruleId": rule.id,
                    "added": added,
                    "kind": rule.kind,
                    "limitUsd": document["limitUsd"],
                    "window": rule.window,
                    "host": rule.host,
                    "pathPrefix": rule.path_prefix,
                    "expiresAt": isoformat(rule.expires_at) if rule.expires_at else None,
                    "message": ADDED if added else ALREADY,
                }

            return ok_result(await services.db.run(write))
        except Exception as exc:
            return to_tool_error(exc, tool="propose_rule")
