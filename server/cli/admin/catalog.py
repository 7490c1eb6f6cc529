"""`paywarden admin catalog ...`: keep the catalog of sellers.

add, edit, list and show entries; accept a candidate in your own words; suspend and resume a
seller; import candidates from a seed file or an x402 Bazaar discovery endpoint; and verify
sellers without paying (the same check the background job runs).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import typer

from server.cli import schemas
from server.cli.context import CliContext, cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

if TYPE_CHECKING:
    from server.sellers.client import SellerClient
from server.vocabulary import SuspensionReason

# catalog.bazaar.MAX_ITEMS, written out so that `--help` loads no service (a test compares).
BAZAAR_MAX_ITEMS = 5000

app = command_group("The catalog of sellers.", example="paywarden admin catalog list --status candidate")

STATUSES = ("listed", "candidate", "suspended", "all")


def _price(value: str | None) -> Decimal | None:
    from server.policy.model import usd_setting

    return None if value is None else usd_setting("price", value)


def _sellers(ctx: CliContext) -> SellerClient:
    from server.sellers.client import SellerClient

    return SellerClient(
        max_response_bytes=ctx.settings.max_response_bytes,
        allow_private_hosts=ctx.settings.allow_private_hosts,
    )


@app.command("add")
def catalog_add(
    name: str = typer.Option(..., "--name", help="The seller's name, in your words."),
    host: str = typer.Option(..., "--host", help="The exact host that charges (no wildcard, no port)."),
    url: str = typer.Option(..., "--url", help="An example paid URL on that host."),
    price: str = typer.Option(..., "--price", help="Price per call in USD."),
    network: str = typer.Option(..., "--network", help="eip155:8453 or eip155:84532."),
    category: str = typer.Option(..., "--category", help="e.g. search, market-data, scraping."),
    pay_to: list[str] = typer.Option(
        None, "--pay-to", help="A receiving address to pin (repeat). None: the seller rotates its address."
    ),
    method: str = typer.Option("GET", "--method", help="The example request's method."),
    body: str | None = typer.Option(None, "--body", help="The example request's body (JSON), not with GET."),
    summary: str = typer.Option("", "--summary", help="What the API does, in your words (search reads it)."),
    as_json: bool = JSON,
) -> None:
    """Add a seller to the catalog, listed at once."""
    from server.catalog.service import add_entry, listing
    from server.policy.model import usd_setting

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
                method=method,
                example_body=body,
                summary=summary,
            )
            shown = listing(session, entry)
        emit(schemas.catalog_entry(shown), as_json=as_json)


@app.command("edit")
def catalog_edit(
    entry_ref: str = typer.Argument(..., metavar="ENTRY", help="The entry's id or host."),
    name: str | None = typer.Option(None, "--name"),
    url: str | None = typer.Option(None, "--url", help="A new example URL, on the same host."),
    method: str | None = typer.Option(None, "--method"),
    body: str | None = typer.Option(None, "--body", help="A new example body (JSON)."),
    clear_body: bool = typer.Option(False, "--clear-body", help="Send the example request without a body."),
    category: str | None = typer.Option(None, "--category"),
    summary: str | None = typer.Option(None, "--summary"),
    price: str | None = typer.Option(None, "--price", help="Price in USD on --network (give both)."),
    network: str | None = typer.Option(None, "--network"),
    pay_to: list[str] = typer.Option(None, "--pay-to", help="Pin these payees instead (repeat)."),
    rotating: bool = typer.Option(False, "--rotating", help="The seller rotates its address: unpin all."),
    as_json: bool = JSON,
) -> None:
    """Change an entry; options not given keep their value."""
    from server.catalog.service import EntryChanges, edit_entry, listing

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        changes = EntryChanges(
            name=name,
            url=url,
            method=method,
            example_body=body,
            clear_example_body=clear_body,
            category=category,
            summary=summary,
            price_usd=_price(price),
            network=network,
            pay_to=list(pay_to) if pay_to else None,
            rotating=rotating,
        )
        with ctx.db.write() as session:
            entry = edit_entry(session, entry_ref, changes=changes)
            shown = listing(session, entry)
        emit(schemas.catalog_entry(shown), as_json=as_json)


@app.command("list")
def catalog_list(
    status: str = typer.Option("all", "--status", help=" | ".join(STATUSES)),
    as_json: bool = JSON,
) -> None:
    """List entries: listed, candidates waiting for you, suspended, or all."""
    from server.catalog.service import entries, listings

    with reported_errors():
        if status not in STATUSES:
            fail(f"invalid_input: --status must be one of {', '.join(STATUSES)}")
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.read() as session:
            rows = entries(
                session,
                candidates={"listed": False, "candidate": True}.get(status),
                suspended={"listed": False, "suspended": True}.get(status),
            )
            shown = listings(session, rows)
        emit(schemas.catalog_entries(shown), as_json=as_json, human=schemas.catalog_table)


@app.command("show")
def catalog_show(
    entry_ref: str = typer.Argument(..., metavar="ENTRY", help="The entry's id or host."),
    as_json: bool = JSON,
) -> None:
    """One entry, with what the seller says of itself (untrusted)."""
    from server.catalog.service import find_entry, listing

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.read() as session:
            shown = listing(session, find_entry(session, entry_ref))
        emit(schemas.catalog_entry(shown, with_seller_text=True), as_json=as_json)


@app.command("accept")
def catalog_accept(
    entry_ref: str = typer.Argument(..., metavar="ENTRY", help="The candidate's id or host."),
    summary: str = typer.Option(..., "--summary", help="What the API does, in your words."),
    name: str | None = typer.Option(None, "--name", help="Its name, in your words (default: its host)."),
    category: str | None = typer.Option(None, "--category"),
    pay_to: list[str] = typer.Option(
        None, "--pay-to", help="Pin these payees (default: the ones the last verification saw)."
    ),
    rotating: bool = typer.Option(False, "--rotating", help="The seller rotates its address."),
    as_json: bool = JSON,
) -> None:
    """List a candidate: it shows in search once a verification passes."""
    from server.catalog.service import accept_candidate, listing

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            entry = accept_candidate(
                session,
                entry_ref,
                summary=summary,
                name=name,
                category=category,
                pay_to=list(pay_to or []),
                rotating=rotating,
                now=ctx.clock.now(),
            )
            shown = listing(session, entry)
        emit(schemas.catalog_entry(shown), as_json=as_json)


@app.command("suspend")
def catalog_suspend(
    entry_ref: str = typer.Argument(..., metavar="ENTRY", help="The entry's id or host."),
    as_json: bool = JSON,
) -> None:
    """Stop listing a seller: no catalog rule accepts it and search never shows it."""
    from server.catalog.service import listing, suspend

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            entry = suspend(session, entry_ref, reason=SuspensionReason.OPERATOR, now=ctx.clock.now())
            shown = listing(session, entry)
        emit(schemas.catalog_entry(shown), as_json=as_json)


@app.command("resume")
def catalog_resume(
    entry_ref: str = typer.Argument(..., metavar="ENTRY", help="The entry's id or host."),
    as_json: bool = JSON,
) -> None:
    """List a suspended seller again (pin its new payee first with `edit --pay-to`)."""
    from server.catalog.service import listing, resume

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            shown = listing(session, resume(session, entry_ref))
        emit(schemas.catalog_entry(shown), as_json=as_json)


@app.command("import-seed")
def catalog_import_seed(
    path: Path | None = typer.Argument(
        None, metavar="[FILE]", help="A seed file (default: the one shipped with Paywarden)."
    ),
    as_json: bool = JSON,
) -> None:
    """Import known public sellers from a seed file, as candidates."""
    from server.catalog import seed

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        parsed = seed.read_seed(path or seed.SHIPPED_SEED)
        with ctx.db.write() as session:
            report = seed.import_seed(session, parsed, actor=ctx.actor, now=ctx.clock.now())
        emit(schemas.catalog_import(report), as_json=as_json)


@app.command("import-bazaar")
def catalog_import_bazaar(
    url: str = typer.Argument(..., help="The facilitator's URL (its /discovery/resources is read)."),
    limit: int = typer.Option(
        BAZAAR_MAX_ITEMS, "--limit", min=1, max=BAZAAR_MAX_ITEMS, help="At most this many."
    ),
    as_json: bool = JSON,
) -> None:
    """Import sellers an x402 Bazaar lists, as candidates to verify and accept."""
    from server.catalog import bazaar

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        sellers = _sellers(ctx)

        async def discover() -> bazaar.Discovery:
            return await bazaar.discover(
                sellers,
                url,
                usdc_by_network=ctx.settings.assets,
                timeout_s=ctx.settings.fetch_timeout_ms / 1000,
                max_items=limit,
            )

        found = anyio.run(discover)
        with ctx.db.write() as session:
            report = bazaar.import_discovery(session, found, actor=ctx.actor, now=ctx.clock.now())
        emit(schemas.catalog_import(report, pages=found.pages), as_json=as_json)


@app.command("verify")
def catalog_verify(
    entry_refs: list[str] = typer.Argument(None, metavar="[ENTRY]...", help="Entries to check (id or host)."),
    every: bool = typer.Option(False, "--all", help="Check every entry, suspended ones included."),
    as_json: bool = JSON,
) -> None:
    """Check sellers without paying: their example URL must answer a 402 Paywarden can pay.

    With no ENTRY and no --all, checks the entries whose last check is more than 6 hours old.
    """
    from server.catalog.service import find_entry
    from server.catalog.verification import CatalogVerifier, CheckResult

    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        verifier = CatalogVerifier(
            db=ctx.db,
            sellers=_sellers(ctx),
            usdc_by_network=ctx.settings.assets,
            timeout_ms=ctx.settings.fetch_timeout_ms,
            clock=ctx.clock,
        )
        if entry_refs:
            with ctx.db.read() as session:
                ids = [find_entry(session, ref).id for ref in entry_refs]

            async def chosen() -> list[CheckResult]:
                return await verifier.verify(ids)

            results = anyio.run(chosen)
        elif every:
            results = anyio.run(verifier.verify_all)
        else:
            results = anyio.run(verifier.verify_due)
        emit(schemas.catalog_checks(results), as_json=as_json, human=schemas.catalog_checks_table)
