"""`paywarden admin approvals ...`: the approvals inbox from the command line.

Deciding here is the break-glass path: it names the member who decides, who must have the role
owner, admin or approver, and it is audited with that member and the operator's account. The
usual path is the approval page, signed in with a passkey.
"""

from __future__ import annotations

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors
from server.vocabulary import ApprovalStatus

app = command_group("Payments waiting for a human.", example="paywarden admin approvals list --org acme")

STATUSES = [str(status) for status in ApprovalStatus]


@app.command("list")
def approvals_list(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    status: str | None = typer.Option(None, "--status", help=" | ".join(STATUSES)),
    as_json: bool = JSON,
) -> None:
    """The organisation's approvals, newest first."""
    from server.approvals import service as approvals
    from server.tenancy.service import find_org

    with reported_errors():
        ctx = cli_context()
        if status is not None and status not in STATUSES:
            fail(f"--status must be one of {', '.join(STATUSES)}")
        ctx.ready()
        now = ctx.clock.now()
        with ctx.db.read() as session:
            organisation = find_org(session, ctx.principal, org)
            rows = approvals.newest(
                session,
                ctx.principal,
                org_id=organisation.id,
                status=None if status is None else ApprovalStatus(status),
            )
            document = schemas.approvals_of_org(organisation, rows, now)
        emit(document, as_json=as_json)


@app.command("decide")
def approvals_decide(
    approval_id: str = typer.Argument(..., help="Approval id (apr_...)."),
    verdict: str = typer.Argument(..., help="approve | deny"),
    member: str = typer.Option(..., "--member", help="The deciding member: id or email."),
    as_json: bool = JSON,
) -> None:
    """Approve or deny a pending payment on behalf of a member (break-glass, audited)."""
    from server.payments import decisions

    with reported_errors():
        if verdict not in ("approve", "deny"):
            fail("the decision must be approve or deny")
        ctx = cli_context()
        ctx.ready()
        now = ctx.clock.now()
        with ctx.db.write() as session:
            approval = decisions.decide_break_glass(
                session,
                ctx.principal,
                approval_id=approval_id,
                approve=verdict == "approve",
                member_ref=member,
                via="cli_break_glass",
                now=now,
            )
            document = schemas.approval(approval, now)
        emit(document, as_json=as_json)
