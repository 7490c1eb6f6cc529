"""`paywarden admin member create`: the people of an organisation, each with a role and, if asked,
a daily sub-cap over all their agents."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors
from server.vocabulary import Role, RuleKind, RuleScope, RuleWindow

app = command_group(
    "Members: the people of an organisation.",
    example="paywarden admin member create --org acme --email ana@acme.example --role approver",
)


@app.command("create")
def member_create(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    email: str = typer.Option(..., "--email", help="The person's email address."),
    role: str = typer.Option(..., "--role", help=" | ".join(Role)),
    daily_cap: str | None = typer.Option(
        None, "--daily-cap", help="The member's daily sub-cap in USD, summed over all their agents."
    ),
    as_json: bool = JSON,
) -> None:
    """Create a member and print a one-time enrolment link for their first passkey.

    An agent that belongs to a member (`admin agent create --member`) can pay only under the
    member's daily sub-cap; without one it cannot pay at all.
    """
    from server.policy.model import usd_setting
    from server.policy.rulebook import add_rule
    from server.policy.rules import RuleTarget
    from server.tenancy.service import create_member, find_org, parse_role

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        now = ctx.clock.now()
        cap = None if daily_cap is None else usd_setting("daily-cap", daily_cap)
        with ctx.db.write() as session:
            created = create_member(
                session,
                org=find_org(session, ctx.principal, org),
                email=email,
                role=parse_role(role),
                actor=ctx.actor,
                now=now,
                enroll_ttl=timedelta(seconds=ctx.settings.enroll_ttl),
            )
            member = created.member
            rule_id = None
            if cap is not None:
                rule_id = add_rule(
                    session,
                    target=RuleTarget(RuleScope.MEMBER, member.id, member.org_id),
                    kind=RuleKind.LIMIT,
                    host=None,
                    path_prefix=None,
                    limit_usd=cap,
                    window=RuleWindow.DAY,
                    actor=ctx.actor,
                    now=now,
                ).id
        emit(
            schemas.member_created(
                member,
                enroll_url=f"{ctx.settings.pages_url}/enroll/{created.enroll_token}",
                daily_cap_rule_id=rule_id,
            ),
            as_json=as_json,
        )


@app.command("enroll-link")
def member_enroll_link(
    member: str = typer.Argument(..., help="Member id or email."),
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    as_json: bool = JSON,
) -> None:
    """Print a new one-time enrolment link (valid PAYWARDEN_ENROLL_TTL, 24 hours by default) for a
    member who needs a passkey, for example after losing every device; the member's earlier link
    stops working."""
    from auth.passkeys import reissue_enrollment
    from server.tenancy.service import find_member, find_org

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            organisation = find_org(session, ctx.principal, org)
            row = find_member(session, ctx.principal, member, org_id=organisation.id)
            enrollment = reissue_enrollment(
                session,
                member=row,
                actor=ctx.actor,
                now=ctx.clock.now(),
                ttl=timedelta(seconds=ctx.settings.enroll_ttl),
            )
        emit(
            schemas.enrollment(
                row,
                enroll_url=f"{ctx.settings.pages_url}/enroll/{enrollment.token}",
                expires_at=enrollment.expires_at,
            ),
            as_json=as_json,
        )


@app.command("list")
def member_list(
    org: str = typer.Option(..., "--org", help="Organisation id or name."), as_json: bool = JSON
) -> None:
    """The organisation's members, oldest first."""
    from server.tenancy.service import find_org, members

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            organisation = find_org(session, ctx.principal, org)
            rows = [
                schemas.member_listed(row) for row in members(session, ctx.principal, org_id=organisation.id)
            ]
        emit({"orgId": organisation.id, "members": rows}, as_json=as_json, human=_member_lines)


def _member_lines(document: dict[str, Any]) -> str:
    return (
        "\n".join(
            f"{row['memberId']}  {row['email']}  {row['role']}"
            + ("" if row["enrolled"] else "  (not enrolled yet)")
            + ("  (disabled)" if row["disabled"] else "")
            for row in document["members"]
        )
        or "No members yet: add one with `paywarden admin member create`."
    )


def _switch(member_ref: str, org: str, *, disabled: bool, as_json: bool) -> None:
    from server.tenancy.service import find_member, find_org, set_member_disabled

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            organisation = find_org(session, ctx.principal, org)
            row = find_member(session, ctx.principal, member_ref, org_id=organisation.id)
            set_member_disabled(session, member=row, disabled=disabled, actor=ctx.actor, now=ctx.clock.now())
            document = schemas.member_listed(row)
        emit(document, as_json=as_json)


@app.command("disable")
def member_disable(
    member: str = typer.Argument(..., help="Member id or email."),
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    as_json: bool = JSON,
) -> None:
    """Disable a member now: their sessions end and their passkeys sign nothing in, in every process."""
    _switch(member, org, disabled=True, as_json=as_json)


@app.command("enable")
def member_enable(
    member: str = typer.Argument(..., help="Member id or email."),
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    as_json: bool = JSON,
) -> None:
    """Enable a disabled member again (they sign in with their passkeys as before)."""
    _switch(member, org, disabled=False, as_json=as_json)
