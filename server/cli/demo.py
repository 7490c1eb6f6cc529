"""`paywarden demo`: a demo organisation, agent, owner and policy (created once), a fresh agent
token, and a link that signs the owner up with a passkey (or, once they have one, signs them in)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal

import typer

from auth.scopes import AGENT_SCOPES
from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import emit, reported_errors
from server.vocabulary import Role

DEMO_ORG = "demo"
DEMO_AGENT = "demo-agent"
DEMO_MEMBER = "owner@demo.example"
DEMO_TOKEN_TTL = 7 * 24 * 3600
DEMO_TOKEN_LABEL = "demo"  # noqa: S105 - a label, not a secret
DEMO_TOKEN_PURPOSE = "paywarden demo token"  # noqa: S105 - a key derivation purpose
# A token with less than a day left is not handed out again: a new one is issued instead.
DEMO_TOKEN_REUSE_MARGIN = timedelta(days=1)


def _demo_secret(key: bytes) -> Callable[[str], str]:
    """The demo token's secret is derived from the master key and the token's id, so every `demo`
    run prints the same token while it is valid (whoever holds the master key holds everything)."""
    from auth.tokens import ACCESS_PREFIX

    def derive(token_id: str) -> str:
        digest = hmac.new(key, token_id.encode(), hashlib.sha256).digest()
        return ACCESS_PREFIX + base64.urlsafe_b64encode(digest).decode().rstrip("=")

    return derive


def demo(as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Create the demo organisation, agent, owner and policy if missing (and the database, on a
    first run); print the demo agent's token (the same one while it is valid), and the owner's
    enrolment link while they have no passkey yet."""
    from auth.passkeys import has_passkey, reissue_enrollment
    from auth.tokens import issue_access_token, reusable_token
    from server.kit import migrations
    from server.policy.service import PolicyChanges, set_policy
    from server.settings import BASE_SEPOLIA
    from server.tenancy.service import (
        MemberNotFound,
        OrgNotFound,
        create_agent,
        create_member,
        create_org,
        find_agent_by_name,
        find_member,
        find_org,
    )
    from server.wallets.master_key import open_master_key

    with reported_errors():
        ctx = cli_context(creates=True)
        if migrations.current_revision(ctx.db) is None:
            # A first run in a new place: the demo makes its database rather than send the
            # newcomer to `migrate` first. A database that is merely behind still needs `migrate`.
            migrations.upgrade(ctx.db)
            open_master_key(ctx.db, ctx.settings, clock=ctx.clock)  # records its check value
        ctx.ready()
        now = ctx.clock.now()
        principal = ctx.principal
        with ctx.db.write() as session:
            try:
                org = find_org(session, principal, DEMO_ORG)
            except OrgNotFound:
                org = create_org(session, name=DEMO_ORG, actor=ctx.actor, now=now)
            agent = find_agent_by_name(session, principal, org_id=org.id, name=DEMO_AGENT)
            if agent is None:
                agent = create_agent(
                    session, org=org, name=DEMO_AGENT, network=BASE_SEPOLIA, actor=ctx.actor, now=now
                )
                set_policy(
                    session,
                    agent=agent,
                    changes=PolicyChanges(max_usd_per_tx=Decimal("0.10"), daily_cap_usd=Decimal("1.00")),
                    actor=ctx.actor,
                    now=now,
                )
            try:
                owner = find_member(session, principal, DEMO_MEMBER, org_id=org.id)
            except MemberNotFound:
                owner = create_member(
                    session, org=org, email=DEMO_MEMBER, role=Role.OWNER, actor=ctx.actor, now=now
                ).member
            enroll_url = None
            if not has_passkey(session, owner):
                enrollment = reissue_enrollment(
                    session,
                    member=owner,
                    actor=ctx.actor,
                    now=now,
                    ttl=timedelta(seconds=ctx.settings.enroll_ttl),
                )
                enroll_url = f"{ctx.settings.pages_url}/enroll/{enrollment.token}"
            derive = _demo_secret(ctx.master.derive(DEMO_TOKEN_PURPOSE))
            issued = reusable_token(
                session,
                org_id=org.id,
                agent_id=agent.id,
                label=DEMO_TOKEN_LABEL,
                audience=ctx.settings.mcp_url,
                derive_secret=derive,
                live_until=now + DEMO_TOKEN_REUSE_MARGIN,
            ) or issue_access_token(
                session,
                org_id=org.id,
                agent_id=agent.id,
                scopes=AGENT_SCOPES,
                audience=ctx.settings.mcp_url,
                ttl_seconds=DEMO_TOKEN_TTL,
                created_by=ctx.actor,
                now=now,
                label=DEMO_TOKEN_LABEL,
                derive_secret=derive,
            )
        data = schemas.demo(
            org=org,
            row=agent,
            owner=owner,
            issued=issued,
            mcp_url=ctx.settings.mcp_url,
            admin_url=f"{ctx.settings.pages_url}/admin",
            enroll_url=enroll_url,
        )
        emit(data, as_json=as_json, human=_instructions)


def _instructions(data: dict[str, object]) -> str:
    url, token = data["mcpUrl"], data["token"]
    cursor = {"mcpServers": {"paywarden": {"url": url, "headers": {"Authorization": f"Bearer {token}"}}}}
    if data.get("enrollUrl"):
        person = [
            f"  Sign up the demo owner ({data['memberEmail']}) with a passkey, once:",
            f"    {data['enrollUrl']}",
            f"  then sign in at {data['adminUrl']}",
        ]
    else:
        person = [
            f"  Sign in as the demo owner ({data['memberEmail']}) with your passkey: {data['adminUrl']}"
        ]
    return "\n".join(
        [
            "Paywarden demo is ready.",
            f"  MCP URL:     {url}",
            f"  Admin:       {data['adminUrl']}",
            *person,
            "",
            "Connect an MCP client by URL alone: it sends you to sign in and pick the agent it acts for.",
            f"  claude mcp add --transport http paywarden {url}",
            "",
            f"Or give a client the agent token {token} (agent {data['agentId']} of organisation "
            f"{data['orgId']}; expires {data['expiresAt']}):",
            f'  claude mcp add --transport http paywarden {url} --header "Authorization: Bearer {token}"',
            "  Cursor, in ~/.cursor/mcp.json: " + json.dumps(cursor),
            "",
            "Then ask your agent for its Paywarden budget (get_budget). To let it pay a seller:",
            f"  .venv/bin/paywarden admin policy set {data['agentId']} --allow-host api.example.com",
            f"  .venv/bin/paywarden admin wallet import {data['agentId']} --from-env WALLET_KEY",
            "",
            "The first payment to a payee the organisation never paid waits for a person: open the",
            "approvalUrl fetch_paid answers (or Approvals in the pages) and decide with your passkey.",
            "Without a browser, an operator can decide for the owner:",
            f"  .venv/bin/paywarden admin approvals list --org {data['orgId']}",
            f"  .venv/bin/paywarden admin approvals decide APPROVAL_ID approve --member {data['memberId']}",
        ]
    )
