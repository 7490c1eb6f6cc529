"""`paywarden admin approvals ...`: the approvals inbox from the command line.

Deciding here is the break-glass path: it names the member who decides, who must have the role
owner, admin or approver, and it is audited with that member and the operator's account. The
usual path is the approval page, signed in with a passkey.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import typer

from server.approvals import service as approvals
from server.cli.context import cli_context
from server.cli.output import emit, fail, reported_errors
from server.kit.clock import isoformat
from server.kit.money import format_usd
from server.models import Approval
from server.models.enums import ApprovalStatus
from server.payments import holds
from server.tenancy.service import find_org

app = typer.Typer(help="Payments waiting for a human.", no_args_is_help=True)

JSON = typer.Option(False, "--json", help="Print one JSON object.")
STATUSES = [str(status) for status in ApprovalStatus]


def approval_document(approval: Approval, now: datetime) -> dict[str, Any]:
    """An approval as an operator sees it: everything the agent sees, and who decided."""
    view = approvals.agent_view(approval, now)
    return {
        "approvalId": approval.id,
        "status": str(approvals.effective_status(approval, now)),
        "intentId": approval.intent_id,
        "amountUsd": format_usd(approval.amount_atomic, atomic=True),
        "host": approval.host,
        "reason": str(approval.reason),
        "holdReasons": approval.decision.get("holdReasons") or [str(approval.reason)],
        "createdAt": isoformat(approval.created_at),
        "decidedAt": isoformat(approval.decided_at) if approval.decided_at else None,
        "expiresAt": isoformat(view.expires_at),
        "agentId": approval.agent_id,
        "payTo": approval.pay_to,
        "network": approval.network,
        "resource": approval.resource,
        "thresholdUsd": None
        if approval.threshold_atomic is None
        else format_usd(approval.threshold_atomic, atomic=True),
        "decidedBy": approval.decided_by,
        "versions": approval.decision.get("versions"),
    }


@app.command("list")
def approvals_list(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    status: str | None = typer.Option(None, "--status", help=" | ".join(STATUSES)),
    as_json: bool = JSON,
) -> None:
    """The organisation's approvals, newest first."""
    with reported_errors():
        ctx = cli_context()
        if status is not None and status not in STATUSES:
            fail(f"--status must be one of {', '.join(STATUSES)}")
        now = ctx.clock.now()
        with ctx.db.read() as session:
            organisation = find_org(session, org)
            rows = approvals.newest(
                session,
                ctx.principal,
                org_id=organisation.id,
                status=None if status is None else ApprovalStatus(status),
            )
            documents = [approval_document(row, now) for row in rows]
        emit({"orgId": organisation.id, "approvals": documents}, as_json=as_json)


@app.command("decide")
def approvals_decide(
    approval_id: str = typer.Argument(..., help="Approval id (apr_...)."),
    verdict: str = typer.Argument(..., help="approve | deny"),
    member: str = typer.Option(..., "--member", help="The deciding member: id or email."),
    as_json: bool = JSON,
) -> None:
    """Approve or deny a pending payment on behalf of a member (break-glass, audited)."""
    with reported_errors():
        if verdict not in ("approve", "deny"):
            fail("the decision must be approve or deny")
        ctx = cli_context()
        ctx.require_current_schema()
        now = ctx.clock.now()
        with ctx.db.write() as session:
            approval = holds.decide(
                session,
                ctx.principal,
                approval_id=approval_id,
                approve=verdict == "approve",
                member_ref=member,
                via="cli_break_glass",
                now=now,
            )
            document = approval_document(approval, now)
        emit(document, as_json=as_json)
