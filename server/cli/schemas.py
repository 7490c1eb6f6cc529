"""What the command line prints: one JSON object per command (`--json`), built here from the
domain objects the services return. The same objects read as `key: value` lines without --json.

Field names are camelCase like the MCP tools' results; amounts are USD strings; times ISO 8601.
Vocabulary (roles, kinds, scopes...) is printed as its plain value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from auth.tokens import IssuedToken
from server.approvals import service as approvals
from server.audit.service import ChainBreak
from server.kit.clock import isoformat
from server.kit.money import format_usd
from server.models import (
    AccessToken,
    Agent,
    Approval,
    CatalogEntry,
    Member,
    Organization,
    Team,
    Wallet,
)
from server.policy.model import Policy
from server.policy.rules import Rule

Document = dict[str, Any]


def _value(item: StrEnum | None) -> str | None:
    return None if item is None else str(item)


def migration(*, before: str | None, after: str | None, database: str) -> Document:
    return {"from": before, "to": after, "database": database}


def org_created(org: Organization, *, monthly_cap_rule_id: str | None) -> Document:
    return {"orgId": org.id, "name": org.name, "monthlyCapRuleId": monthly_cap_rule_id}


def org_settings(org: Organization) -> Document:
    return {"orgId": org.id, "approvalTtlSeconds": org.approval_ttl_seconds}


def agent(row: Agent) -> Document:
    return {
        "agentId": row.id,
        "orgId": row.org_id,
        "name": row.name,
        "network": row.network,
        "teamId": row.team_id,
        "memberId": row.member_id,
    }


def policy(row: Agent, current: Policy) -> Document:
    return {"agentId": row.id, "policyVersion": current.version, "policy": current.to_document()}


def wallet(row: Wallet) -> Document:
    return {"agentId": row.agent_id, "address": row.address, "mode": _value(row.mode)}


def token_issued(issued: IssuedToken) -> Document:
    return {
        "tokenId": issued.token_id,
        "token": issued.token,
        "expiresAt": isoformat(issued.expires_at),
        "scopes": [str(scope) for scope in issued.scopes],
    }


def token_revoked(row: AccessToken) -> Document:
    return {"tokenId": row.id, "revokedAt": isoformat(row.revoked_at) if row.revoked_at else None}


def team(row: Team) -> Document:
    return {"teamId": row.id, "orgId": row.org_id, "name": row.name}


def member_created(row: Member, *, enroll_url: str, daily_cap_rule_id: str | None) -> Document:
    return {
        "memberId": row.id,
        "orgId": row.org_id,
        "email": row.email,
        "role": _value(row.role),
        "enrollUrl": enroll_url,
        "dailyCapRuleId": daily_cap_rule_id,
    }


def rule(item: Rule) -> Document:
    return {
        "ruleId": item.id,
        "version": item.version,
        "scope": _value(item.scope),
        "kind": _value(item.kind),
        "host": item.host,
        "pathPrefix": item.path_prefix,
        "limitUsd": None if item.limit_atomic is None else format_usd(item.limit_atomic, atomic=True),
        "window": _value(item.window),
        "source": _value(item.source),
        "expiresAt": item.expires_at.isoformat() if item.expires_at else None,
    }


def rule_removed(item: Rule) -> Document:
    return {"ruleId": item.id, "version": item.version, "removed": True}


def rules_of_org(org: Organization, rules: Iterable[tuple[Rule, str]]) -> Document:
    return {"orgId": org.id, "rules": [{**rule(item), "scopeId": scope_id} for item, scope_id in rules]}


def catalog_entry(entry: CatalogEntry) -> Document:
    return {
        "id": entry.id,
        "name": entry.name,
        "host": entry.host,
        "url": entry.url,
        "priceUsd": format_usd(entry.price_atomic, atomic=True),
        "network": entry.network,
        "category": entry.category,
        "payToMode": _value(entry.pay_to_mode),
        "payTo": list(entry.pinned_pay_to),
        "verifiedAt": entry.verified_at.isoformat() if entry.verified_at else None,
    }


def broken_link(found: ChainBreak) -> Document:
    document: Document = {
        "orgId": found.org_id,
        "seq": found.seq,
        "eventId": found.event_id,
        "reason": found.reason,
    }
    if found.last_seq is not None:
        document["lastSeq"] = found.last_seq
    return document


def audit_verification(*, checked: int, broken: Sequence[Document]) -> Document:
    return {"intact": not broken, "checked": checked, "broken": list(broken)}


def demo(
    *,
    org: Organization,
    row: Agent,
    owner: Member,
    issued: IssuedToken,
    mcp_url: str,
    admin_url: str,
) -> Document:
    return {
        "orgId": org.id,
        "agentId": row.id,
        "memberId": owner.id,
        "mcpUrl": mcp_url,
        "tokenId": issued.token_id,
        "token": issued.token,
        "expiresAt": isoformat(issued.expires_at),
        "scopes": [str(scope) for scope in issued.scopes],
        "adminUrl": admin_url,
    }


def approval(row: Approval, now: datetime) -> Document:
    """An approval as an operator sees it: everything the agent sees, and who decided."""
    return {
        "approvalId": row.id,
        "status": str(approvals.effective_status(row, now)),
        "intentId": row.intent_id,
        "amountUsd": format_usd(row.amount_atomic, atomic=True),
        "host": row.host,
        "reason": str(row.reason),
        "createdAt": isoformat(row.created_at),
        "decidedAt": isoformat(row.decided_at) if row.decided_at else None,
        "expiresAt": isoformat(approvals.agent_view(row, now).expires_at),
        "agentId": row.agent_id,
        "payTo": row.pay_to,
        "network": row.network,
        "resource": row.resource,
        "thresholdUsd": None
        if row.threshold_atomic is None
        else format_usd(row.threshold_atomic, atomic=True),
        "decidedBy": row.decided_by,
        "versions": row.decision.get("versions"),
    }


def approvals_of_org(org: Organization, rows: Iterable[Approval], now: datetime) -> Document:
    return {"orgId": org.id, "approvals": [approval(row, now) for row in rows]}
