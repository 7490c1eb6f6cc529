"""`paywarden admin audit events`: an organisation's audit events, newest first, filtered by kind,
agent and time (the chain itself is checked by `paywarden audit verify`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

app = command_group(
    "The audit log's events.", example="paywarden admin audit events --org acme --kind member. --limit 20"
)


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        fail("--since must be an ISO 8601 date or time, e.g. 2026-12-01 or 2026-12-01T09:30:00Z")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@app.command("events")
def audit_events(
    org: str | None = typer.Option(
        None, "--org", help="Organisation id or name (default: the agent's, or all)."
    ),
    kind: str | None = typer.Option(
        None, "--kind", help="Only this event type (agent.disabled), or a family ending in a dot (agent.)."
    ),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's events."),
    since: str | None = typer.Option(None, "--since", help="At or after (ISO 8601; UTC when no offset)."),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="How many, newest first."),
    as_json: bool = JSON,
) -> None:
    """The most recent audit events: who did what, to which agent or member, and when."""
    from server.audit.service import events_page
    from server.tenancy.service import find_agent, find_org, organisations

    with reported_errors():
        after = _since(since)
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            target = find_agent(session, ctx.principal, agent) if agent else None
            if org is not None:
                orgs = [find_org(session, ctx.principal, org).id]
                if target is not None and target.org_id not in orgs:
                    fail(f"agent {agent} is not in organisation {org}")
            elif target is not None:
                orgs = [target.org_id]
            else:
                orgs = [item.id for item in organisations(session, ctx.principal)]
            found = [
                event
                for org_id in orgs
                for event in events_page(
                    session,
                    ctx.principal,
                    org_id=org_id,
                    kind=kind,
                    agent_id=target.id if target else None,
                    since=after,
                    limit=limit,
                )
            ]
            found.sort(key=lambda event: (event.created_at, event.seq), reverse=True)
            rows = [schemas.audit_event(event) for event in found[:limit]]
        emit({"events": rows}, as_json=as_json, human=_lines)


def _lines(document: dict[str, Any]) -> str:
    rows = document["events"]
    if not rows:
        return "No audit events match."
    return "\n".join(
        f"{row['createdAt']}  #{row['seq']:<5} {row['kind']:<28} {row['actor']}"
        + (f"  agent {row['agentId']}" if row["agentId"] else "")
        + (f"  on {row['subjectId']}" if row["subjectId"] and row["subjectId"] != row["agentId"] else "")
        for row in rows
    )
