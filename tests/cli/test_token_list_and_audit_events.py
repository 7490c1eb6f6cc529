"""`paywarden admin token list` and `admin audit events`: what still works and what happened, as
one JSON object with --json or lines for a person; never a token's secret."""

from __future__ import annotations

from auth.scopes import Scope
from auth.tokens import issue_access_token
from server.kit.clock import SystemClock
from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.paywarden import settings_for
from tests.support.tenants import make_agent


def test_token_list_shows_agent_and_admin_tokens_but_no_secret(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    agent = make_agent(db, settings, allow_hosts=["api.example.com"], org_name="listed", name="lister")
    other = make_agent(db, settings, allow_hosts=["api.example.com"], org_name="elsewhere", name="other")
    admin = run_cli(db.url, "admin", "token", "issue", "--admin", "--org", "listed", "--json").json()
    extra = run_cli(
        db.url, "admin", "token", "issue", "--agent", agent.agent_id, "--scopes", "payments:read", "--json"
    ).json()
    run_cli(db.url, "admin", "token", "revoke", extra["tokenId"], "--json")
    with db.write() as session:  # an expired token no longer works, so it is not listed
        expired = issue_access_token(
            session,
            org_id=agent.org_id,
            agent_id=agent.agent_id,
            scopes=frozenset({Scope.PAYMENTS_READ}),
            audience=settings.mcp_url,
            ttl_seconds=60,
            created_by="test",
            now=SystemClock().now().replace(year=2020),
        )

    listed = run_cli(db.url, "admin", "token", "list", "--org", "listed", "--json")
    rows = listed.json()["tokens"]
    assert {(row["kind"], row["agentId"]) for row in rows} == {("admin", None), ("agent", agent.agent_id)}
    by_id = {row["tokenId"]: row for row in rows}
    assert by_id[admin["tokenId"]]["scopes"] == ["admin:read"]
    assert by_id[admin["tokenId"]]["expiresAt"] == admin["expiresAt"]
    assert extra["tokenId"] not in by_id
    assert expired.token_id not in by_id
    assert {"lastUsedAt", "createdAt", "createdBy"} <= set(rows[0])
    for secret in (admin["token"], agent.token, other.token):
        assert secret not in listed.stdout

    mine = run_cli(db.url, "admin", "token", "list", "--agent", agent.agent_id, "--json").json()["tokens"]
    assert [row["agentId"] for row in mine] == [agent.agent_id]
    everyone = run_cli(db.url, "admin", "token", "list", "--json").json()["tokens"]
    assert other.agent_id in {row["agentId"] for row in everyone}
    human = run_cli(db.url, "admin", "token", "list", "--org", "listed").stdout
    assert admin["tokenId"] in human
    assert "admin:read" in human
    wrong = run_cli(db.url, "admin", "token", "list", "--org", "listed", "--agent", other.agent_id)
    assert wrong.exit_code != 0
    assert "not in organisation" in wrong.stderr


def test_audit_events_filter_by_kind_agent_and_time(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    agent = make_agent(db, settings, allow_hosts=["api.example.com"], org_name="audited", name="a")
    quiet = make_agent(db, settings, allow_hosts=["api.example.com"], org_id=agent.org_id, name="q")
    run_cli(db.url, "admin", "agent", "disable", agent.agent_id)
    run_cli(db.url, "admin", "agent", "enable", agent.agent_id)

    events = run_cli(db.url, "admin", "audit", "events", "--org", "audited", "--json").json()["events"]
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs, reverse=True)
    assert [event["kind"] for event in events[:2]] == ["agent.enabled", "agent.disabled"]
    assert events[0]["actor"].startswith("cli:")

    family = run_cli(
        db.url, "admin", "audit", "events", "--org", "audited", "--kind", "agent.", "--json"
    ).json()
    assert {event["kind"] for event in family["events"]} >= {
        "agent.created",
        "agent.disabled",
        "agent.enabled",
    }
    assert all(event["kind"].startswith("agent.") for event in family["events"])
    only = run_cli(db.url, "admin", "audit", "events", "--agent", quiet.agent_id, "--json").json()["events"]
    assert only
    assert {event["agentId"] for event in only} == {quiet.agent_id}
    two = run_cli(db.url, "admin", "audit", "events", "--org", "audited", "--limit", "2", "--json").json()
    assert [event["seq"] for event in two["events"]] == seqs[:2]
    later = run_cli(db.url, "admin", "audit", "events", "--since", "2999-01-01", "--json").json()
    assert later == {"events": []}
    human = run_cli(db.url, "admin", "audit", "events", "--org", "audited", "--limit", "1").stdout
    assert "agent.enabled" in human
    bad = run_cli(db.url, "admin", "audit", "events", "--since", "yesterday")
    assert bad.exit_code != 0
    assert "--since must be an ISO 8601" in bad.stderr
