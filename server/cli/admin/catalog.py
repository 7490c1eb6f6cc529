"""`paywarden admin catalog add`: list a seller, with its payees pinned or rotating."""

from __future__ import annotations

import typer

from server.catalog.service import add_entry
from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, emit, reported_errors
from server.policy.model import usd_setting

app = typer.Typer(help="The catalog of listed sellers.", no_args_is_help=True)


@app.command("add")
def catalog_add(
    name: str = typer.Option(..., "--name", help="The seller's name."),
    host: str = typer.Option(..., "--host", help="The exact host that charges (no wildcard, no port)."),
    url: str = typer.Option(..., "--url", help="An example paid URL on that host."),
    price: str = typer.Option(..., "--price", help="Price per call in USD."),
    network: str = typer.Option(..., "--network", help="eip155:8453 or eip155:84532."),
    category: str = typer.Option(..., "--category", help="e.g. search, market-data, scraping."),
    pay_to: list[str] = typer.Option(
        None, "--pay-to", help="A receiving address to pin (repeat). None: the seller rotates its address."
    ),
    as_json: bool = JSON,
) -> None:
    """Add a seller to the catalog."""
    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            entry = add_entry(
                session,
                name=name,
                host=host,
                url=url,
                price_usd=usd_setting("price", price),
                network=network,
                category=category,
                pay_to=list(pay_to or []),
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(schemas.catalog_entry(entry), as_json=as_json)
