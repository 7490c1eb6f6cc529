"""The admin API's routes under /api/v1, and the same table as its OpenAPI operations: each
operation names its method, path, answer and body, and the handler that serves it."""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from server.vocabulary import ApprovalStatus, IntentStatus
from server.web.api import (
    circuits,
    confirmations,
    handlers,
    inventory,
    openapi,
    organization,
    oversight,
    people,
    records,
    rules,
    tokens,
)
from server.web.api.openapi import Operation, Parameter
from server.web.api.parts import DEFAULT_PAGE, MAX_PAGE, Handler, endpoint
from server.web.api.schemas import (
    AgentCreate,
    AgentDocument,
    AgentList,
    ApprovalDocument,
    ApprovalList,
    AuditEventPage,
    AuditVerification,
    CatalogEntryDocument,
    CatalogPage,
    ChangeDocument,
    CircuitDocument,
    CircuitList,
    ConfirmationRequired,
    ConnectionDocument,
    ConnectionList,
    MemberDocument,
    MemberInvite,
    MemberList,
    OrganizationChange,
    OrganizationDocument,
    PaymentDocument,
    PaymentExport,
    PaymentPage,
    PolicyChangeDocument,
    PolicyChangeList,
    PolicyDocument,
    PolicyNarrowing,
    RoleChange,
    RuleChange,
    RuleCreate,
    RuleDocument,
    RuleList,
    TeamList,
    TokenDocument,
    TokenIssue,
    TokenList,
    WalletDocument,
    WalletList,
)

PREFIX = "/api/v1"
TIME = {"type": "string", "format": "date-time"}
AGENT_ID = Parameter("agent_id", "path", {"type": "string"}, "The agent's id.")
MEMBER_ID = Parameter("member_id", "path", {"type": "string"}, "The member's id (or email).")
CONNECTION_ID = Parameter("connection_id", "path", {"type": "string"}, "The connection's (grant's) id.")
APPROVAL_ID = Parameter("approval_id", "path", {"type": "string"}, "The approval's id.")
CHANGE_REQUEST_ID = Parameter("change_id", "path", {"type": "string"}, "The policy change request's id.")
CHANGE_ID = Parameter("change_id", "path", {"type": "string"}, "The pending change's id (chg_...).")
RULE_ID = Parameter("rule_id", "path", {"type": "string"}, "The rule's id.")
PAYMENT_ID = Parameter("payment_id", "path", {"type": "string"}, "The payment's id.")
ENTRY_ID = Parameter("entry_id", "path", {"type": "string"}, "The catalog entry's id.")
HOST = Parameter("host", "path", {"type": "string", "maxLength": 255}, "The seller's host.")
TOKEN_ID = Parameter("token_id", "path", {"type": "string"}, "The token's id (tok_...).")
CURSOR = Parameter("cursor", "query", {"type": "string"}, "The `nextCursor` of the page before.")
LIMIT = Parameter(
    "limit",
    "query",
    {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": DEFAULT_PAGE},
    "How many a page holds.",
)
SINCE = Parameter("since", "query", TIME, "Created at or after this time (ISO 8601).")
UNTIL = Parameter("until", "query", TIME, "Created before this time (ISO 8601).")
BY_AGENT = Parameter("agent", "query", {"type": "string"}, "Only this agent's.")
STATUS = Parameter(
    "status", "query", {"type": "string", "enum": [str(s) for s in IntentStatus]}, "Only this status."
)

# (operation, handler): the one table both the router and the OpenAPI document read.
_TABLE: tuple[tuple[Operation, Handler], ...] = (
    (
        Operation("/agents", "listAgents", "The organisation's agents, oldest first.", AgentList),
        handlers.list_agents,
    ),
    (
        Operation(
            "/agents",
            "createAgent",
            "Create an agent on a network. Its first policy allows no host (add them with the policy "
            "change, which waits for a passkey) and it has the default weekly limit rule.",
            AgentDocument,
            not_found=True,
            method="post",
            body=AgentCreate,
            status=201,
        ),
        inventory.create_agent_route,
    ),
    (
        Operation(
            "/agents/{agent_id}",
            "getAgent",
            "One agent of the organisation.",
            AgentDocument,
            (AGENT_ID,),
            not_found=True,
        ),
        handlers.show_agent,
    ),
    (
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
        handlers.disable_agent,
    ),
    (
        Operation(
            "/agents/{agent_id}/enable",
            "enableAgent",
            "Enable a disabled agent again.",
            AgentDocument,
            (AGENT_ID,),
            not_found=True,
            method="post",
        ),
        handlers.enable_agent,
    ),
    (
        Operation(
            "/agents/{agent_id}/policy",
            "getAgentPolicy",
            "The agent's policy in force and its version.",
            PolicyDocument,
            (AGENT_ID,),
            not_found=True,
        ),
        records.show_policy,
    ),
    (
        Operation(
            "/agents/{agent_id}/policy",
            "narrowAgentPolicy",
            "Change the agent's policy (a new version). Lower caps, fewer allowed hosts and more "
            "denied ones are made at once; a change that widens answers 202 and waits for a "
            "member's passkey.",
            PolicyDocument,
            (AGENT_ID,),
            not_found=True,
            method="patch",
            body=PolicyNarrowing,
            confirms=True,
        ),
        records.change_policy,
    ),
    (
        Operation(
            "/agents/{agent_id}/wallet",
            "getAgentWallet",
            "The agent's wallet: address, how it signs, and its USDC balance read from the chain now "
            "(null, with `balanceError`, when it cannot be read in time). Its key never comes back.",
            WalletDocument,
            (AGENT_ID,),
            not_found=True,
        ),
        inventory.show_wallet,
    ),
    (
        Operation(
            "/agents/{agent_id}/wallets",
            "listAgentWallets",
            "Every wallet the agent had: the current one, then the retired ones a rotation left, each "
            "with its USDC balance on each network that can be read now and its sweeps.",
            WalletList,
            (AGENT_ID,),
            not_found=True,
        ),
        inventory.list_wallets,
    ),
    (
        Operation(
            "/agents/{agent_id}/tokens",
            "listAgentTokens",
            "The agent's tokens that still work, newest first; never a secret.",
            TokenList,
            (AGENT_ID,),
            not_found=True,
        ),
        tokens.list_tokens,
    ),
    (
        Operation(
            "/agents/{agent_id}/tokens",
            "issueAgentToken",
            "Ask for a token for the agent's MCP endpoint: it waits for a member's passkey (202), "
            "and the confirmation page shows it once.",
            ConfirmationRequired,
            (AGENT_ID,),
            not_found=True,
            method="post",
            body=TokenIssue,
            status=202,
        ),
        tokens.issue_token,
    ),
    (
        Operation(
            "/agents/{agent_id}/tokens/{token_id}",
            "revokeAgentToken",
            "Revoke one of the agent's tokens at once.",
            TokenDocument,
            (AGENT_ID, TOKEN_ID),
            not_found=True,
            method="delete",
        ),
        tokens.revoke_agent_token,
    ),
    (
        Operation(
            "/organization",
            "getOrganization",
            "The organisation's settings: name, approval wait, and its Slack webhook, masked.",
            OrganizationDocument,
        ),
        organization.show_organization,
    ),
    (
        Operation(
            "/organization",
            "changeOrganization",
            "Change the organisation's settings: name, how long held payments wait, and the Slack "
            "webhook (an https URL on hooks.slack.com, or null to remove it; shown masked only).",
            OrganizationDocument,
            method="patch",
            body=OrganizationChange,
        ),
        organization.change_organization,
    ),
    (
        Operation(
            "/rules",
            "listRules",
            "The organisation's rules in force, oldest first; with `agent`, those that apply to it "
            "(its own, its team's, its member's and the organisation's).",
            RuleList,
            (BY_AGENT,),
            not_found=True,
        ),
        rules.list_rules,
    ),
    (
        Operation(
            "/rules",
            "createRule",
            "Add a limit, deny or hold rule for an agent, team, member or the organisation. Rules only "
            "restrict, so it is made at once.",
            RuleDocument,
            not_found=True,
            method="post",
            body=RuleCreate,
            status=201,
        ),
        rules.create_rule,
    ),
    (
        Operation(
            "/rules/{rule_id}",
            "changeRule",
            "Change a limit rule's limit (a new version of the rule). A lower limit is made at once; "
            "a higher one answers 202 and waits for a member's passkey.",
            RuleDocument,
            (RULE_ID,),
            not_found=True,
            method="patch",
            body=RuleChange,
            confirms=True,
        ),
        rules.change_rule_limit,
    ),
    (
        Operation(
            "/rules/{rule_id}",
            "removeRule",
            "Ask to remove a rule: it lets through what the rule stopped or held, so it waits for a "
            "member's passkey (202) and is removed only then.",
            ConfirmationRequired,
            (RULE_ID,),
            not_found=True,
            method="delete",
            status=202,
        ),
        rules.ask_to_remove_rule,
    ),
    (
        Operation("/members", "listMembers", "The organisation's members, oldest first.", MemberList),
        people.list_members,
    ),
    (
        Operation(
            "/members",
            "inviteMember",
            "Invite a member with a role: it waits for a member's passkey (202), and the "
            "confirmation page shows the one-time enrolment link.",
            ConfirmationRequired,
            method="post",
            body=MemberInvite,
            status=202,
        ),
        confirmations.invite_member,
    ),
    (
        Operation(
            "/members/{member_id}",
            "changeMember",
            "Give a member another role (the last enabled owner keeps theirs). A lower role is "
            "given at once; a higher one answers 202 and waits for a member's passkey.",
            MemberDocument,
            (MEMBER_ID,),
            not_found=True,
            method="patch",
            body=RoleChange,
            conflict=True,
            confirms=True,
        ),
        people.change_member,
    ),
    (
        Operation(
            "/members/{member_id}/disable",
            "disableMember",
            "Disable a member now: their sessions end and their passkeys sign nothing in.",
            MemberDocument,
            (MEMBER_ID,),
            not_found=True,
            method="post",
        ),
        people.disable_member,
    ),
    (
        Operation(
            "/members/{member_id}/enable",
            "enableMember",
            "Enable a disabled member again.",
            MemberDocument,
            (MEMBER_ID,),
            not_found=True,
            method="post",
        ),
        people.enable_member,
    ),
    (
        Operation(
            "/changes/{change_id}",
            "getChange",
            "A change that waits for a member's passkey, and whether it was confirmed.",
            ChangeDocument,
            (CHANGE_ID,),
            not_found=True,
        ),
        confirmations.show_change,
    ),
    (
        Operation("/teams", "listTeams", "The organisation's teams, oldest first.", TeamList),
        people.list_teams,
    ),
    (
        Operation(
            "/connections",
            "listConnections",
            "The organisation's live connections (OAuth grants), most recently used first.",
            ConnectionList,
        ),
        oversight.list_connections,
    ),
    (
        Operation(
            "/connections/{connection_id}",
            "revokeConnection",
            "Revoke a connection and every token it led to, at once; answers what was revoked.",
            ConnectionDocument,
            (CONNECTION_ID,),
            not_found=True,
            method="delete",
        ),
        oversight.revoke_connection,
    ),
    (
        Operation(
            "/approvals",
            "listApprovals",
            "The organisation's approvals, newest first (deciding is on the passkey page).",
            ApprovalList,
            (
                Parameter(
                    "status",
                    "query",
                    {"type": "string", "enum": [str(s) for s in ApprovalStatus]},
                    "Only this stored status.",
                ),
                LIMIT,
            ),
        ),
        oversight.list_approvals,
    ),
    (
        Operation(
            "/approvals/{approval_id}",
            "getApproval",
            "One approval, with the passkey page where a member decides it.",
            ApprovalDocument,
            (APPROVAL_ID,),
            not_found=True,
        ),
        oversight.show_approval,
    ),
    (
        Operation(
            "/policy-changes",
            "listPolicyChanges",
            "The policy changes agents asked for, newest first (an owner or admin decides each on "
            "its passkey page).",
            PolicyChangeList,
            (BY_AGENT, LIMIT),
            not_found=True,
        ),
        oversight.list_policy_changes,
    ),
    (
        Operation(
            "/policy-changes/{change_id}",
            "getPolicyChange",
            "One policy change an agent asked for, with the passkey page where it is decided.",
            PolicyChangeDocument,
            (CHANGE_REQUEST_ID,),
            not_found=True,
        ),
        oversight.show_policy_change,
    ),
    (
        Operation(
            "/payments",
            "listPayments",
            "The organisation's payments, newest first, a page at a time.",
            PaymentPage,
            (BY_AGENT, STATUS, SINCE, UNTIL, CURSOR, LIMIT),
            not_found=True,
        ),
        handlers.list_payments,
    ),
    (
        Operation(
            "/payments/export",
            "exportPayments",
            "Every matching payment, newest first, for accounting: one row each with agent, day, "
            "host, payee, amount, network and transaction; `format=csv` gives the same rows as CSV.",
            PaymentExport,
            (
                Parameter(
                    "format",
                    "query",
                    {"type": "string", "enum": ["json", "csv"], "default": "json"},
                    "json or csv.",
                ),
                BY_AGENT,
                STATUS,
                SINCE,
                UNTIL,
            ),
            not_found=True,
            csv=True,
        ),
        records.export_payments,
    ),
    (  # after /payments/export, which the router would otherwise take for a payment's id
        Operation(
            "/payments/{payment_id}",
            "getPayment",
            "One payment of the organisation.",
            PaymentDocument,
            (PAYMENT_ID,),
            not_found=True,
        ),
        inventory.show_payment,
    ),
    (
        Operation(
            "/catalog",
            "listCatalog",
            "The server's catalog of sellers (the same for every organisation), oldest first, a page "
            "at a time: listed and suspended entries with their prices.",
            CatalogPage,
            (CURSOR, LIMIT),
        ),
        inventory.list_catalog,
    ),
    (
        Operation(
            "/catalog/{entry_id}",
            "getCatalogEntry",
            "One seller of the catalog, with its prices.",
            CatalogEntryDocument,
            (ENTRY_ID,),
            not_found=True,
        ),
        inventory.show_catalog_entry,
    ),
    (
        Operation(
            "/circuits",
            "listCircuits",
            "The seller hosts the organisation blocked after paid calls that delivered nothing.",
            CircuitList,
        ),
        circuits.list_circuits,
    ),
    (
        Operation(
            "/circuits/{host}",
            "clearCircuit",
            "Clear a host's open circuit: its earlier failures stop counting and payments may resume.",
            CircuitDocument,
            (HOST,),
            not_found=True,
            method="delete",
        ),
        circuits.clear_seller_circuit,
    ),
    (
        Operation(
            "/audit/events",
            "listAuditEvents",
            "The organisation's audit events, newest first, a page at a time.",
            AuditEventPage,
            (
                Parameter(
                    "kind",
                    "query",
                    {"type": "string", "maxLength": 60},
                    "Only this event type (`agent.disabled`), or a family of them (`agent.`).",
                ),
                BY_AGENT,
                SINCE,
                CURSOR,
                LIMIT,
            ),
            not_found=True,
        ),
        records.list_audit_events,
    ),
    (
        Operation(
            "/audit/verify",
            "verifyAudit",
            "Whether the organisation's audit hash chain verifies, and where it breaks.",
            AuditVerification,
        ),
        handlers.verify_audit,
    ),
)

OPERATIONS = tuple(operation for operation, _ in _TABLE)


def routes() -> list[BaseRoute]:
    found: list[BaseRoute] = [
        Route(
            f"{PREFIX}{operation.path}",
            endpoint(handler, write=operation.writes, status=operation.status),
            methods=[operation.method.upper()],
        )
        for operation, handler in _TABLE
    ]
    found.append(Route(f"{PREFIX}/openapi.json", openapi.endpoint(OPERATIONS), methods=["GET"]))
    return found
