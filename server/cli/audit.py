"""`paywarden audit verify`: recompute each organisation's hash chain."""

from __future__ import annotations

import typer

from server.audit.service import first_broken_link
from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import emit, reported_errors
from server.tenancy.service import find_org, organisations

app = typer.Typer(help="The audit log.", no_args_is_help=True)


@app.command("verify")
def verify(
    org: str | None = typer.Option(None, "--org", help="Organisation id or name (default: all)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Exit 0 when every chain is intact, 1 when one is broken (naming the first broken link)."""
    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            orgs = [find_org(session, ctx.principal, org)] if org else organisations(session, ctx.principal)
            broken = []
            for item in orgs:
                event = first_broken_link(session, item.id)
                if event is not None:
                    broken.append(schemas.broken_link(item, event))
        emit(schemas.audit_verification(checked=len(orgs), broken=broken), as_json=as_json)
        if broken:
            raise typer.Exit(1)
