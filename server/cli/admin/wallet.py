"""`paywarden admin wallet import`: seal an agent's private key with the master key."""

from __future__ import annotations

import os

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

app = command_group(
    "Agents' wallets.", example="paywarden admin wallet import researcher --from-env WALLET_KEY"
)


@app.command("import")
def wallet_import(
    agent: str = typer.Argument(..., help="Agent id or name."),
    from_env: str = typer.Option(..., "--from-env", help="Name of the variable holding the private key."),
    as_json: bool = JSON,
) -> None:
    """Import a private key from an environment variable, sealed with the master key.

    Remove the variable afterwards; the key is never printed or stored in clear.
    """
    from server.tenancy.service import find_agent
    from server.wallets.service import import_local_key, parse_private_key

    with reported_errors():
        ctx = cli_context(exempt=[from_env])
        ctx.ready()
        raw = os.environ.get(from_env)
        if not raw:
            fail(f"the variable {from_env} is not set")
        key = parse_private_key(raw)
        with ctx.db.write() as session:
            target = find_agent(session, ctx.principal, agent)
            wallet = import_local_key(
                session,
                master=ctx.master,
                agent=target,
                private_key=key,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(schemas.wallet(wallet), as_json=as_json)
