"""`paywarden admin client ...`: confidential OAuth clients for the client_credentials grant, each
bound to one agent, for headless agents that should fetch their own short-lived tokens."""

from __future__ import annotations

import typer

from auth.scopes import ScopeError, parse_scopes
from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

app = command_group(
    "OAuth clients for client_credentials, bound to one agent.",
    example="paywarden admin client create --agent researcher --scopes payments:read",
)


@app.command("create")
def client_create(
    agent: str = typer.Option(..., "--agent", help="Agent id or name: the client's tokens act for it alone."),
    name: str = typer.Option(..., "--name", help="A name people will see on the connections page."),
    scopes: str = typer.Option(..., "--scopes", help='The most it may ask for, e.g. "payments:read".'),
    as_json: bool = JSON,
) -> None:
    """Create a client_credentials client. Its secret is shown once; only its hash is stored."""
    from auth.clients import create_admin_client
    from server.tenancy.service import find_agent

    with reported_errors():
        try:
            granted = parse_scopes(scopes, for_agent=True)
        except ScopeError as exc:
            fail(str(exc))
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            created = create_admin_client(
                session,
                agent=find_agent(session, ctx.principal, agent),
                name=name,
                scopes=granted,
                resource=ctx.settings.mcp_url,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(
            schemas.client_created(created, token_url=f"{ctx.settings.public_url}/oauth/token"),
            as_json=as_json,
        )


@app.command("revoke")
def client_revoke(
    client_id: str = typer.Argument(..., help="The client's id (pwc_...)."), as_json: bool = JSON
) -> None:
    """Disable a client and revoke its tokens at once."""
    from auth.clients import revoke_admin_client

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            row = revoke_admin_client(session, ctx.principal, client_id=client_id, now=ctx.clock.now())
        emit(schemas.client_revoked(row), as_json=as_json)
