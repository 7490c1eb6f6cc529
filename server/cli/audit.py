"""`paywarden audit`: verify each organisation's hash chain, and print the chains' heads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

if TYPE_CHECKING:
    from server.audit.service import Head

app = command_group("The audit log.", example="paywarden audit verify --org acme")


def _expected_heads(path: Path) -> dict[str, Head]:
    from server.audit.service import parse_heads

    try:
        return parse_heads(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror}")
    except (ValueError, AttributeError) as exc:
        fail(f"{path}: {exc}")


@app.command("verify")
def verify(
    org: str | None = typer.Option(None, "--org", help="Organisation id or name (default: all)."),
    expect_head: Path | None = typer.Option(
        None,
        "--expect-head",
        help="A file `audit head --json` wrote earlier: each chain must still reach its head.",
    ),
    as_json: bool = JSON,
) -> None:
    """Exit 0 when every chain is intact, 1 when one is broken (naming the first broken link)."""
    from server.audit.service import ChainBreak, first_broken_link
    from server.tenancy.service import find_org, organisations

    with reported_errors():
        expected = _expected_heads(expect_head) if expect_head is not None else {}
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            orgs = [find_org(session, ctx.principal, org)] if org else organisations(session, ctx.principal)
            broken: list[ChainBreak] = []
            for item in orgs:
                found = first_broken_link(session, item.id, expected=expected.pop(item.id, None))
                if found is not None:
                    broken.append(found)
            if org is None:
                # A head for an organisation whose chain is gone altogether: truncated to nothing.
                broken.extend(
                    ChainBreak(head.org_id, head.seq, "truncated", last_seq=0) for head in expected.values()
                )
        emit(
            schemas.audit_verification(checked=len(orgs), broken=[schemas.broken_link(b) for b in broken]),
            as_json=as_json,
        )
        if broken:
            raise typer.Exit(1)


@app.command("head")
def head(as_json: bool = JSON) -> None:
    """Print each organisation's newest event (seq and hash). Keep the output somewhere the
    database's writers cannot reach: `audit verify --expect-head` then proves nothing was cut off."""
    from server.audit.service import heads, heads_document

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            found = heads(session)
        document = heads_document(found)
        if as_json:
            emit(document, as_json=True)
        else:
            typer.echo("\n".join(f"{h.org_id} {h.seq} {h.hash}" for h in found) or "no audit events")
