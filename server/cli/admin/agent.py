"""`paywarden admin agent ...`: create agents, each in a team and under a member if asked."""

from __future__ import annotations

from typing import Any

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors
from server.vocabulary import BASE_SEPOLIA

app = command_group("Agents.", example="paywarden admin agent create --org acme --name researcher")


@app.command("create")
def agent_create(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    name: str = typer.Option(..., "--name", help="A name unique in the organisation."),
    network: str = typer.Option(
        BASE_SEPOLIA, "--network", help="eip155:8453 (Base) or eip155:84532 (Base Sepolia)."
    ),
    team: str | None = typer.Option(None, "--team", help="Team id or name: the team's rules apply too."),
    member: str | None = typer.Option(
        None, "--member", help="Member id or email: the person whose daily sub-cap this agent shares."
    ),
    as_json: bool = JSON,
) -> None:
    """Create an agent. It starts with a policy that allows no host until you set one, and a
    weekly limit of 5 times its daily cap."""
    from server.tenancy.service import create_agent, find_member, find_org, find_team

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        principal = ctx.principal
        with ctx.db.write() as session:
            organisation = find_org(session, principal, org)
            created = create_agent(
                session,
                org=organisation,
                name=name,
                network=network,
                actor=ctx.actor,
                now=ctx.clock.now(),
                team=find_team(session, principal, team, org_id=organisation.id) if team else None,
                member=find_member(session, principal, member, org_id=organisation.id) if member else None,
            )
        emit(schemas.agent(created), as_json=as_json)


@app.command("list")
def agent_list(
    org: str = typer.Option(..., "--org", help="Organisation id or name."), as_json: bool = JSON
) -> None:
    """The organisation's agents, oldest first."""
    from server.tenancy.service import agents, find_org

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            organisation = find_org(session, ctx.principal, org)
            found = [
                schemas.agent_listed(row) for row in agents(session, ctx.principal, org_id=organisation.id)
            ]
        emit({"orgId": organisation.id, "agents": found}, as_json=as_json, human=_agent_lines)


def _agent_lines(document: dict[str, Any]) -> str:
    rows = document["agents"]
    if not rows:
        return "No agents yet: create one with `paywarden admin agent create`."
    return "\n".join(
        f"{row['agentId']}  {row['name']}  {row['network']}" + ("  (disabled)" if row["disabled"] else "")
        for row in rows
    )


@app.command("show")
def agent_show(agent: str = typer.Argument(..., help="Agent id or name."), as_json: bool = JSON) -> None:
    """One agent, with the version of its policy in force."""
    from server.tenancy.service import agent_with_policy, find_agent

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            row, policy = agent_with_policy(
                session, ctx.principal, find_agent(session, ctx.principal, agent).id
            )
            document = {**schemas.agent_listed(row), "policyVersion": policy.version}
        emit(document, as_json=as_json)


def _switch(agent: str, *, disabled: bool, as_json: bool) -> None:
    from server.payments.decisions import set_agent_disabled
    from server.tenancy.service import find_agent

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            agent_id = find_agent(session, ctx.principal, agent).id
            row = set_agent_disabled(
                session, ctx.principal, agent_id=agent_id, disabled=disabled, now=ctx.clock.now()
            )
            document = schemas.agent_listed(row)
        emit(document, as_json=as_json)


@app.command("disable")
def agent_disable(agent: str = typer.Argument(..., help="Agent id or name."), as_json: bool = JSON) -> None:
    """Disable an agent now: its tokens and connections are refused on their next call in every
    process, its pending approvals are denied, and nothing it started can be signed any more."""
    _switch(agent, disabled=True, as_json=as_json)


@app.command("enable")
def agent_enable(agent: str = typer.Argument(..., help="Agent id or name."), as_json: bool = JSON) -> None:
    """Enable a disabled agent again (approvals ended by disabling it stay ended)."""
    _switch(agent, disabled=False, as_json=as_json)
