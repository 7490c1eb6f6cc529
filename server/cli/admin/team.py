"""`paywarden admin team create`: groups of agents that team rules apply to together."""

from __future__ import annotations

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors

app = command_group(
    "Teams: groups of agents that team rules apply to together.",
    example="paywarden admin team create research --org acme",
)


@app.command("create")
def team_create(
    name: str = typer.Argument(..., help="A name unique in the organisation."),
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    as_json: bool = JSON,
) -> None:
    """Create a team. Put agents in it with `admin agent create --team`."""
    from server.tenancy.service import create_team, find_org

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            team = create_team(
                session,
                org=find_org(session, ctx.principal, org),
                name=name,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(schemas.team(team), as_json=as_json)
