"""`paywarden audit verify`: recompute each organisation's hash chain."""

from __future__ import annotations

import typer
from sqlmodel import select

from server.audit.service import first_broken_link
from server.cli.context import cli_context
from server.cli.output import emit, reported_errors
from server.models import Organization
from server.tenancy.service import find_org

app = typer.Typer(help="The audit log.", no_args_is_help=True)


@app.command("verify")
def verify(
    org: str | None = typer.Option(None, "--org", help="Organisation id or name (default: all)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Exit 0 when every chain is intact, 1 when one is broken (naming the first broken link)."""
    with reported_errors():
        ctx = cli_context()
        with ctx.db.read() as session:
            orgs = [find_org(session, org)] if org else list(session.exec(select(Organization)))
            broken = []
            for item in orgs:
                event = first_broken_link(session, item.id)
                if event is not None:
                    broken.append({"orgId": item.id, "seq": event.seq, "eventId": event.id})
        emit({"intact": not broken, "checked": len(orgs), "broken": broken}, as_json=as_json)
        if broken:
            raise typer.Exit(1)
