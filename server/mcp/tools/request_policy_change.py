"""request_policy_change: ask the people who run this agent for more room, with the exact change
and a short note saying why.

Not read-only, but it changes nothing by itself: it stores a request that an owner or admin of
the organisation approves or rejects on its page with a passkey (server/web/pages/policy_changes.py).
The same change asked again returns the request already waiting.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import WithJsonSchema

from auth.scopes import Scope
from server.approvals.policy_changes import MAX_NOTE, MAX_OPEN_PER_AGENT, invalid
from server.mcp.arguments import USD_PATTERN
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.policy_change_offers import Asked, PolicyChangeOffers
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import policy_changes as schema
from server.mcp.schemas.policy_changes import RequestPolicyChangeResult
from server.policy.requested_changes import MAX_ITEMS, ChangeRequestError, parse_requested_change
from server.services import Services

DESCRIPTION = (
    "Ask the people who run this agent for more room when its policy refused something the user "
    "needs: a host to allow, a higher per-payment or daily cap, a higher approval threshold, a network, "
    "a rule raised or removed (rule ids are in get_budget's limits and in the rules of a refusal or "
    "a hold). Give the exact change and a short note "
    f"(at most {MAX_NOTE} characters) saying why. Nothing changes until an owner or admin approves it "
    "with a passkey on the page at manageUrl: give the user manageUrl as a plain link and poll "
    "get_policy_change_status with requestId. If the client supports URL elicitation, the user is "
    "also offered the page directly and the same call can wait for the decision. Every part must "
    f"give more room than the policy has now. At most {MAX_OPEN_PER_AGENT} requests wait per agent; "
    "asking again for a change that already waits returns that request. Requests lapse after 24 hours."
)

_HOSTS = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_ITEMS}
_USD = {"type": "string", "pattern": USD_PATTERN}
Note = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_NOTE,
            "description": "Required. Why the agent needs this change, in a sentence the user will read.",
        }
    ),
]
Change = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "description": "Required. The exact change; give only the parts needed, at least one.",
            "additionalProperties": False,
            "properties": {
                "addAllowHosts": {**_HOSTS, "description": "Hosts to allow (exact, or *.domain)."},
                "removeDenyHosts": {**_HOSTS, "description": "Denied hosts to stop denying."},
                "addNetworks": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["eip155:8453", "eip155:84532"]},
                    "minItems": 1,
                },
                "removePayToDeny": {**_HOSTS, "description": "Denied payee addresses to stop denying."},
                "maxUsdPerTx": {**_USD, "description": "A higher most per payment."},
                "dailyCapUsd": {**_USD, "description": "A higher daily cap."},
                "stepUpThresholdUsd": {
                    **_USD,
                    "description": "A higher amount from which a person approves.",
                },
                "removeStepUpThreshold": {"type": "boolean", "enum": [True]},
                "velocityMaxTx": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "More payments per window.",
                },
                "velocityMaxUsd": {**_USD, "description": "More USD per velocity window."},
                "allowCatalogHosts": {"type": "boolean", "enum": [True]},
                "allowUnverifiedSellers": {"type": "boolean", "enum": [True]},
                "raiseRuleLimits": {
                    "type": "array",
                    "maxItems": MAX_ITEMS,
                    "items": {
                        "type": "object",
                        "properties": {"ruleId": {"type": "string"}, "limitUsd": _USD},
                        "required": ["ruleId", "limitUsd"],
                        "additionalProperties": False,
                    },
                    "description": "Limit rules that bound this agent, to raise (ruleId from get_budget).",
                },
                "removeRules": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": MAX_ITEMS,
                    "description": "Rules that bound this agent, to remove (from get_budget or a refusal).",
                },
            },
        }
    ),
]


def register(mcp: ToolRegistry, services: Services) -> None:
    offers = PolicyChangeOffers(services)

    @mcp.tool(
        name="request_policy_change",
        title="Ask a person for more room in the spending policy",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def request_policy_change(
        ctx: Context, note: Note = None, change: Change = None
    ) -> Annotated[CallToolResult, RequestPolicyChangeResult] | InputRequiredResult:
        try:
            principal = principal_for(ctx, Scope.POLICY_REQUEST)
            try:
                requested = parse_requested_change(change)
            except ChangeRequestError as exc:
                raise invalid(exc) from exc
            outcome = await offers.ask_and_offer(
                ctx, principal, requested, note, {"note": note, "change": change}
            )
        except Exception as exc:
            return to_tool_error(exc, tool="request_policy_change")
        if isinstance(outcome, InputRequiredResult):
            return outcome
        return _result(outcome, services)


def _result(outcome: Asked, services: Services) -> CallToolResult:
    structured = schema.asked(
        outcome.view, public_url=services.settings.public_url, created=outcome.created, prompt=outcome.prompt
    )
    return ok_result(structured, fenced=[schema.note_block(outcome.view.request)])
