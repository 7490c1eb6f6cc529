"""`paywarden admin team ...` and `admin member ...`: an organisation's teams and people."""

from __future__ import annotations

import typer

from server.cli.context import cli_context
from server.cli.output import emit, reported_errors
from server.policy.model import usd_setting
from server.policy.rule_service import add_rule
from server.tenancy.service import ROLES, create_member, create_team, find_org

team_app = typer.Typer(
    help="Teams: groups of agents that team rules apply to together.", no_args_is_help=True
)
member_app = typer.Typer(help="Members: the people of an organisation.", no_args_is_help=True)

JSON = typer.Option(False, "--json", help="Print one JSON object.")


@team_app.command("create")
def team_create(
    name: str = typer.Argument(..., help="A name unique in the organisation."),
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    as_json: bool = JSON,
) -> None:
    """Create a team. Put agents in it with `admin agent create --team`."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            team = create_team(
                session, org=find_org(session, org), name=name, actor=ctx.actor, now=ctx.clock.now()
            )
        emit({"teamId": team.id, "orgId": team.org_id, "name": team.name}, as_json=as_json)


@member_app.command("create")
def member_create(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    email: str = typer.Option(..., "--email", help="The person's email address."),
    role: str = typer.Option(..., "--role", help=" | ".join(ROLES)),
    daily_cap: str | None = typer.Option(
        None, "--daily-cap", help="The member's daily sub-cap in USD, summed over all their agents."
    ),
    as_json: bool = JSON,
) -> None:
    """Create a member and print a one-time enrolment link for their first passkey.

    An agent that belongs to a member (`admin agent create --member`) can pay only under the
    member's daily sub-cap; without one it cannot pay at all.
    """
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        now = ctx.clock.now()
        cap = None if daily_cap is None else usd_setting("daily-cap", daily_cap)
        with ctx.db.write() as session:
            created = create_member(
                session, org=find_org(session, org), email=email, role=role, actor=ctx.actor, now=now
            )
            rule_id = None
            if cap is not None:
                rule = add_rule(
                    session,
                    scope="member",
                    scope_ref=created.member.id,
                    kind="limit",
                    host=None,
                    path_prefix=None,
                    limit_usd=cap,
                    window="day",
                    actor=ctx.actor,
                    now=now,
                )
                rule_id = rule.id
        member = created.member
        emit(
            {
                "memberId": member.id,
                "orgId": member.org_id,
                "email": member.email,
                "role": member.role,
                "enrollUrl": f"{ctx.settings.public_url}/enroll/{created.enroll_token}",
                "dailyCapRuleId": rule_id,
            },
            as_json=as_json,
        )
