"""The admin API's routes under /api/v1, and the same table as its OpenAPI operations."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from server.vocabulary import IntentStatus
from server.web.api import handlers, openapi
from server.web.api.openapi import Operation, Parameter
from server.web.api.schemas import AgentDocument, AgentList, AuditVerification, PaymentPage

PREFIX = "/api/v1"
TIME = {"type": "string", "format": "date-time"}
AGENT_ID = Parameter("agent_id", "path", {"type": "string"}, "The agent's id.")

OPERATIONS = (
    Operation("/agents", "listAgents", "The organisation's agents, oldest first.", AgentList),
    Operation(
        "/agents/{agent_id}",
        "getAgent",
        "One agent of the organisation.",
        AgentDocument,
        (AGENT_ID,),
        not_found=True,
    ),
    Operation(
        "/agents/{agent_id}/disable",
        "disableAgent",
        "Disable an agent now: its tokens and connections are refused on their next call, its "
        "pending approvals are denied and nothing it started can sign.",
        AgentDocument,
        (AGENT_ID,),
        not_found=True,
        method="post",
    ),
    Operation(
        "/agents/{agent_id}/enable",
        "enableAgent",
        "Enable a disabled agent again.",
        AgentDocument,
        (AGENT_ID,),
        not_found=True,
        method="post",
    ),
    Operation(
        "/payments",
        "listPayments",
        "The organisation's payments, newest first, a page at a time.",
        PaymentPage,
        (
            Parameter("agent", "query", {"type": "string"}, "Only this agent's payments."),
            Parameter(
                "status",
                "query",
                {"type": "string", "enum": [str(s) for s in IntentStatus]},
                "Only this status.",
            ),
            Parameter("since", "query", TIME, "Created at or after this time (ISO 8601)."),
            Parameter("until", "query", TIME, "Created before this time (ISO 8601)."),
            Parameter("cursor", "query", {"type": "string"}, "The `nextCursor` of the page before."),
            Parameter(
                "limit",
                "query",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": handlers.MAX_PAGE,
                    "default": handlers.DEFAULT_PAGE,
                },
                "How many payments a page holds.",
            ),
        ),
        not_found=True,
    ),
    Operation(
        "/audit/verify",
        "verifyAudit",
        "Whether the organisation's audit hash chain verifies, and where it breaks.",
        AuditVerification,
    ),
)

_HANDLERS = {
    "listAgents": handlers.list_agents,
    "getAgent": handlers.show_agent,
    "disableAgent": handlers.disable_agent,
    "enableAgent": handlers.enable_agent,
    "listPayments": handlers.list_payments,
    "verifyAudit": handlers.verify_audit,
}


def routes() -> list[BaseRoute]:
    found: list[BaseRoute] = [
        Route(
            f"{PREFIX}{operation.path}",
            handlers.endpoint(
                _HANDLERS[operation.operation_id], write=operation.writes, status=operation.status
            ),
            methods=[operation.method.upper()],
        )
        for operation in OPERATIONS
    ]
    found.append(Route(f"{PREFIX}/openapi.json", openapi.endpoint(OPERATIONS), methods=["GET"]))
    return found
