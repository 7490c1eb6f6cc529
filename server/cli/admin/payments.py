"""`paywarden admin payments list|export`: an organisation's payments, newest first, filtered by
agent, status and time; exported whole as CSV or JSON for accounting."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors
from server.vocabulary import IntentStatus

app = command_group(
    "Payments: list them, or export them for accounting.",
    example="paywarden admin payments export --org acme --format csv --since 2026-11-01",
)

PAGE = 500
STATUSES = ", ".join(str(status) for status in IntentStatus)


class Format(StrEnum):
    CSV = "csv"
    JSON = "json"


def _instant(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        fail(f"{name} must be an ISO 8601 date or time, e.g. 2026-12-01 or 2026-12-01T09:30:00Z")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _status(text: str | None) -> IntentStatus | None:
    if text is None:
        return None
    if text not in {str(status) for status in IntentStatus}:
        fail(f"--status must be one of: {STATUSES}")
    return IntentStatus(text)


def _rows(
    org: str, agent: str | None, status: str | None, since: str | None, until: str | None, limit: int | None
) -> tuple[str, list[dict[str, Any]]]:
    """The organisation's id and its payments (newest first, every page, or the first `limit`)."""
    from server.payments.ledger import payments_page
    from server.payments.repository import PaymentFilter
    from server.tenancy.service import find_agent, find_org

    ctx = cli_context()
    ctx.ready()
    with ctx.db.read() as session:
        organisation = find_org(session, ctx.principal, org)
        agent_id = None
        if agent is not None:
            named = find_agent(session, ctx.principal, agent)
            if named.org_id != organisation.id:
                fail(f"agent {agent} is not in organisation {organisation.name}")
            agent_id = named.id
        only = PaymentFilter(
            org_id=organisation.id,
            agent_id=agent_id,
            status=_status(status),
            since=_instant(since, "--since"),
            until=_instant(until, "--until"),
        )
        rows: list[dict[str, Any]] = []
        after = None
        while limit is None or len(rows) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(rows))
            page = payments_page(session, ctx.principal, only, after=after, limit=size)
            rows.extend(schemas.payment(row) for row in page)
            if len(page) < size:
                break
            after = (page[-1].created_at, page[-1].id)
    return organisation.id, rows


AGENT = typer.Option(None, "--agent", help="Only this agent's payments.")
STATUS = typer.Option(None, "--status", help=f"Only this status: {STATUSES}.")
SINCE = typer.Option(None, "--since", help="Created at or after (ISO 8601; UTC when no offset).")
UNTIL = typer.Option(None, "--until", help="Created before (ISO 8601; UTC when no offset).")
ORG = typer.Option(..., "--org", help="Organisation id or name.")


@app.command("list")
def payments_list(
    org: str = ORG,
    agent: str | None = AGENT,
    status: str | None = STATUS,
    since: str | None = SINCE,
    until: str | None = UNTIL,
    limit: int = typer.Option(20, "--limit", min=1, max=10_000, help="How many, newest first."),
    as_json: bool = JSON,
) -> None:
    """The organisation's most recent payments."""
    with reported_errors():
        org_id, rows = _rows(org, agent, status, since, until, limit)
        emit({"orgId": org_id, "payments": rows}, as_json=as_json, human=_lines)


def _lines(document: dict[str, Any]) -> str:
    rows = document["payments"]
    if not rows:
        return "No payments match."
    return "\n".join(
        f"{row['createdAt']}  {row['status']:<18}  {row['amountUsd']:>10} USD  {row['host']}  "
        f"{row['intentId']}"
        for row in rows
    )


@app.command("export")
def payments_export(
    org: str = ORG,
    export_format: Format = typer.Option(..., "--format", help="csv or json."),
    agent: str | None = AGENT,
    status: str | None = STATUS,
    since: str | None = SINCE,
    until: str | None = UNTIL,
) -> None:
    """Every matching payment, newest first, to standard output: CSV with a header row, or JSON."""
    with reported_errors():
        org_id, rows = _rows(org, agent, status, since, until, None)
        if export_format is Format.JSON:
            typer.echo(json.dumps({"orgId": org_id, "payments": rows}, ensure_ascii=False))
            return
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=schemas.PAYMENT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        typer.echo(out.getvalue(), nl=False)
