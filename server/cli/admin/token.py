"""`paywarden admin token ...`: issue agent and admin tokens, list those that still work, and
revoke them."""

from __future__ import annotations

from typing import Any

import typer

from auth.scopes import Scope, ScopeError, parse_scopes
from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

# auth.tokens.DEFAULT_TTL_SECONDS, written out so that `--help` loads no service (a test compares).
DEFAULT_TTL_SECONDS = 30 * 24 * 3600

app = command_group(
    "Access tokens.",
    example="paywarden admin token issue --agent researcher --scopes 'payments:read payments:write'",
)

# What `--access` grants an admin token: least privilege unless asked.
ADMIN_ACCESS = {"read": Scope.ADMIN_READ, "write": Scope.ADMIN_WRITE}


@app.command("issue")
def token_issue(
    agent: str | None = typer.Option(None, "--agent", help="Agent id or name: an agent token for /mcp."),
    scopes: str | None = typer.Option(
        None, "--scopes", help='Space-separated, e.g. "payments:read payments:write".'
    ),
    admin: bool = typer.Option(False, "--admin", help="An admin token for /api/v1 instead."),
    org: str | None = typer.Option(None, "--org", help="Organisation, with --admin."),
    access: str = typer.Option(
        "read", "--access", help="With --admin: read (admin:read) or write (admin:write, which also reads)."
    ),
    ttl: int = typer.Option(DEFAULT_TTL_SECONDS, "--ttl", help="Lifetime in seconds."),
    as_json: bool = JSON,
) -> None:
    """Issue a token. It is shown once; only its hash is stored."""
    from auth.tokens import issue_access_token
    from server.tenancy.service import find_agent, find_org

    with reported_errors():
        if admin == (agent is not None):
            fail("give either --agent AGENT --scopes ... or --admin --org ORG")
        ctx = cli_context()
        ctx.ready()
        now = ctx.clock.now()
        with ctx.db.write() as session:
            if agent is not None:
                if not scopes:
                    fail("--scopes is required with --agent")
                try:
                    granted = parse_scopes(scopes, for_agent=True)
                except ScopeError as exc:
                    fail(str(exc))
                target = find_agent(session, ctx.principal, agent)
                issued = issue_access_token(
                    session,
                    org_id=target.org_id,
                    agent_id=target.id,
                    scopes=granted,
                    audience=ctx.settings.mcp_url,
                    ttl_seconds=ttl,
                    created_by=ctx.actor,
                    now=now,
                )
            else:
                if org is None:
                    fail("--org is required with --admin")
                if access not in ADMIN_ACCESS:
                    fail("--access must be read or write")
                organisation = find_org(session, ctx.principal, org)
                issued = issue_access_token(
                    session,
                    org_id=organisation.id,
                    agent_id=None,
                    scopes=frozenset({ADMIN_ACCESS[access]}),
                    audience=ctx.settings.admin_api_audience,
                    ttl_seconds=ttl,
                    created_by=ctx.actor,
                    now=now,
                )
        emit(schemas.token_issued(issued), as_json=as_json)


@app.command("revoke")
def token_revoke(
    token_id: str = typer.Argument(..., help="Token id (tok_...)."), as_json: bool = JSON
) -> None:
    """Revoke a token at once."""
    from auth.tokens import revoke_token

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            row = revoke_token(session, ctx.principal, token_id=token_id, now=ctx.clock.now())
        emit(schemas.token_revoked(row), as_json=as_json)


@app.command("list")
def token_list(
    org: str | None = typer.Option(None, "--org", help="Organisation id or name (default: all)."),
    agent: str | None = typer.Option(None, "--agent", help="Only this agent's tokens."),
    as_json: bool = JSON,
) -> None:
    """Tokens that still work (not revoked, not expired), newest first: agent tokens and admin
    tokens, with scopes, expiry and last use when known. Never a secret: only hashes are kept."""
    from auth.tokens import live_tokens
    from server.tenancy.service import find_agent, find_org

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            org_id = find_org(session, ctx.principal, org).id if org else None
            agent_id = None
            if agent is not None:
                target = find_agent(session, ctx.principal, agent)
                if org_id is not None and target.org_id != org_id:
                    fail(f"agent {agent} is not in organisation {org}")
                agent_id = target.id
            found = live_tokens(session, ctx.principal, org_id=org_id, agent_id=agent_id, now=ctx.clock.now())
            rows = [schemas.token_listed(live.row, last_used_at=live.last_used_at) for live in found]
        emit({"tokens": rows}, as_json=as_json, human=_token_lines)


def _token_lines(document: dict[str, Any]) -> str:
    rows = document["tokens"]
    if not rows:
        return "No working tokens: issue one with `paywarden admin token issue`."
    return "\n".join(
        f"{row['tokenId']}  {row['kind']:<5}  {row['agentId'] or row['orgId']}  {' '.join(row['scopes'])}  "
        f"expires {row['expiresAt']}" + (f"  last used {row['lastUsedAt']}" if row["lastUsedAt"] else "")
        for row in rows
    )
