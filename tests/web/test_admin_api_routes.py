"""The admin API's members, teams, policy, agent tokens, payments export and audit events against a
real server: an admin:write token changes what the command line changes, every answer matches the
OpenAPI document, and every refusal is a problem document with a stable code."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest

from auth.scopes import Scope
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import PaymentIntent
from server.vocabulary import Role
from tests.support.admin_api import admin_token, call, make_connection, problem
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member, make_team


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def _described(server: RunningServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.settings.admin_api_audience}/openapi.json", timeout=30).json())


def _matches(document: dict[str, Any], answer: httpx.Response, path: str, method: str) -> None:
    """The answer is one the OpenAPI document describes for this operation and status."""
    described = document["paths"][path][method]["responses"][str(answer.status_code)]["content"]
    media = described[answer.headers["content-type"].split(";")[0]]
    jsonschema.validate(answer.json(), {**media["schema"], "components": document["components"]})


def test_members_and_teams(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="m")
    owner = make_member(db, agent.org_id, role=Role.OWNER, email="owner@example.com")
    helper = make_member(db, agent.org_id, role=Role.VIEWER, email="helper@example.com")
    make_team(db, agent.org_id, "ops")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    document = _described(server)

    listed = call(server, "get", "/members", writer)
    _matches(document, listed, "/members", "get")
    assert [m["email"] for m in listed.json()["members"]] == ["owner@example.com", "helper@example.com"]
    teams = call(server, "get", "/teams", writer)
    _matches(document, teams, "/teams", "get")
    assert [t["name"] for t in teams.json()["teams"]] == ["ops"]

    # A higher role waits for a member's passkey (tests/web/test_admin_api_confirmations.py).
    asked = call(server, "patch", f"/members/{helper}", writer, body={"role": "owner"})
    assert asked.status_code == 202, asked.text
    _matches(document, asked, "/members/{member_id}", "patch")
    assert asked.headers["location"] == asked.json()["confirmationUrl"]
    roles = {m["email"]: m["role"] for m in call(server, "get", "/members", writer).json()["members"]}
    assert roles["helper@example.com"] == "viewer"
    second = make_member(db, agent.org_id, role=Role.OWNER, email="second@example.com")
    demoted = call(server, "patch", f"/members/{owner}", writer, body={"role": "approver"})
    _matches(document, demoted, "/members/{member_id}", "patch")
    assert demoted.json()["role"] == "approver"
    # The last enabled owner keeps the role: someone must be able to change the organisation.
    last = problem(
        call(server, "patch", f"/members/{second}", writer, body={"role": "viewer"}), 409, "last_owner"
    )
    assert "owner" in last["detail"]
    bad = problem(
        call(server, "patch", f"/members/{helper}", writer, body={"role": "king"}), 400, "invalid_body"
    )
    assert "role" in bad["detail"]
    problem(
        call(server, "patch", f"/members/{helper}", writer, body={"role": "owner", "x": 1}),
        400,
        "invalid_body",
    )

    off = call(server, "post", f"/members/{owner}/disable", writer)
    _matches(document, off, "/members/{member_id}/disable", "post")
    assert off.json()["disabled"] is True
    assert call(server, "post", f"/members/{owner}/enable", writer).json()["disabled"] is False
    problem(call(server, "post", "/members/member_missing/disable", writer), 404, "member_not_found")

    kinds = [e["kind"] for e in call(server, "get", "/audit/events", writer, kind="member.").json()["events"]]
    assert kinds[:3] == ["member.enabled", "member.disabled", "member.role_changed"]


def test_policy_and_agent_tokens(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], daily_cap="7.00", name="t")
    other = make_agent(db, server.settings, allow_hosts=["api.example.com"], org_id=agent.org_id, name="u")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    document = _described(server)

    policy = call(server, "get", f"/agents/{agent.agent_id}/policy", writer)
    _matches(document, policy, "/agents/{agent_id}/policy", "get")
    assert policy.json()["policy"]["dailyCapUsd"] == "7.00"
    assert policy.json()["policy"]["allowHosts"] == ["api.example.com"]

    tokens_path = f"/agents/{agent.agent_id}/tokens"
    before = call(server, "get", tokens_path, writer).json()["tokens"]
    # A new token waits for a member's passkey; nothing is issued yet.
    issued = call(server, "post", tokens_path, writer, body={"scopes": ["payments:read"], "ttlSeconds": 600})
    assert issued.status_code == 202, issued.text
    _matches(document, issued, "/agents/{agent_id}/tokens", "post")
    assert issued.json()["status"] == "confirmation_required"
    assert "token" not in issued.json()

    listed = call(server, "get", tokens_path, writer)
    _matches(document, listed, "/agents/{agent_id}/tokens", "get")
    assert listed.json()["tokens"] == before
    assert {t["kind"] for t in listed.json()["tokens"]} == {"agent"}

    # An admin scope is never issued to an agent; an empty list is no token either.
    problem(call(server, "post", tokens_path, writer, body={"scopes": ["admin:write"]}), 400, "invalid_body")
    problem(call(server, "post", tokens_path, writer, body={"scopes": []}), 400, "invalid_body")
    problem(
        call(server, "post", tokens_path, writer, body={"scopes": ["payments:read"], "ttlSeconds": 5}),
        400,
        "invalid_body",
    )

    token_id = before[0]["id"]
    # Revoked only through its own agent's path.
    problem(
        call(server, "delete", f"/agents/{other.agent_id}/tokens/{token_id}", writer), 404, "token_not_found"
    )
    revoked = call(server, "delete", f"{tokens_path}/{token_id}", writer)
    _matches(document, revoked, "/agents/{agent_id}/tokens/{token_id}", "delete")
    assert token_id not in {t["id"] for t in call(server, "get", tokens_path, writer).json()["tokens"]}
    problem(call(server, "delete", f"{tokens_path}/{token_id}", writer), 404, "token_not_found")


def test_the_csv_export_matches_the_json_row_for_row(server: RunningServer, db: Database) -> None:
    a1 = make_agent(db, server.settings, allow_hosts=["api.example.com", "b.example.com"], name="x1")
    a2 = make_agent(db, server.settings, allow_hosts=["api.example.com"], org_id=a1.org_id, name="x2")
    now = SystemClock().now()
    for n in range(3):
        reserve_now(db, a1.agent_id, facts(f"e1-{n}", amount=10_000 * (n + 1)), now)
    reserve_now(db, a1.agent_id, facts("e1-b", host="b.example.com"), now)
    kept = reserve_now(db, a2.agent_id, facts("e2"), now).intent
    assert kept is not None
    # What a payment keeps of the seller's answer; a header that starts like a formula stays text.
    receipt = {
        "body_sha256": "ab" * 32,
        "body_bytes": 1234,
        "body_truncated": True,
        "content_type": "application/json",
        "payment_response": "=HYPERLINK(1)",
    }
    with db.write() as session:
        row = session.get(PaymentIntent, kept.id)
        assert row is not None
        for name, value in receipt.items():
            setattr(row, name, value)
        session.add(row)
    reader = admin_token(db, server, a1.org_id, frozenset({Scope.ADMIN_READ}))
    document = _described(server)

    as_json = call(server, "get", "/payments/export", reader)
    _matches(document, as_json, "/payments/export", "get")
    rows = as_json.json()["rows"]
    assert len(rows) == 5
    as_csv = call(server, "get", "/payments/export", reader, format="csv")
    assert as_csv.status_code == 200, as_csv.text
    assert as_csv.headers["content-type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert list(parsed[0]) == [
        "agent",
        "day",
        "host",
        "payee",
        "amount",
        "network",
        "transaction",
        "termsSha256",
        "bodySha256",
        "bodyBytes",
        "bodyTruncated",
        "contentType",
        "paymentResponse",
        "sentBy",
    ]
    # Every value a string in both, row for row; only a cell a spreadsheet would run differs.
    json_e2 = next(row for row in rows if row["agent"] == a2.agent_id)
    csv_e2 = next(row for row in parsed if row["agent"] == a2.agent_id)
    assert json_e2["paymentResponse"] == "=HYPERLINK(1)"
    assert csv_e2 == {**json_e2, "paymentResponse": "'=HYPERLINK(1)"}
    assert [row for row in parsed if row is not csv_e2] == [row for row in rows if row is not json_e2]
    assert (csv_e2["bodySha256"], csv_e2["bodyBytes"], csv_e2["bodyTruncated"], csv_e2["contentType"]) == (
        "ab" * 32,
        "1234",
        "true",
        "application/json",
    )
    # The terms of every reserved payment are kept from the start: the digest of its offer.
    assert all(len(row["termsSha256"]) == 64 for row in rows)
    assert all(row["bodySha256"] == "" for row in rows if row is not json_e2)  # nothing served yet
    listed = call(server, "get", "/payments", reader, agent=a2.agent_id)
    _matches(document, listed, "/payments", "get")
    (shown,) = listed.json()["payments"]
    assert (shown["bodySha256"], shown["bodyBytes"], shown["bodyTruncated"]) == ("ab" * 32, 1234, True)
    assert (shown["contentType"], shown["paymentResponse"]) == ("application/json", "=HYPERLINK(1)")
    assert shown["termsSha256"] == json_e2["termsSha256"]
    assert {
        row["amount"] for row in rows if row["agent"] == a1.agent_id and row["host"] == "api.example.com"
    } == {
        "0.01",
        "0.02",
        "0.03",
    }
    assert {row["day"] for row in rows} == {now.date().isoformat()}
    assert all(row["transaction"] == "" for row in rows)  # none found on chain yet

    only = call(server, "get", "/payments/export", reader, format="csv", agent=a2.agent_id).text
    assert [row["agent"] for row in csv.DictReader(io.StringIO(only))] == [a2.agent_id]
    future = call(server, "get", "/payments/export", reader, since="2999-01-01T00:00:00Z").json()
    assert future == {"rows": []}
    problem(call(server, "get", "/payments/export", reader, format="xlsx"), 400, "invalid_input")


def test_audit_events_filter_and_page(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="aud")
    outsider = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="out")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    for _ in range(2):
        call(server, "post", f"/agents/{agent.agent_id}/disable", writer)
        call(server, "post", f"/agents/{agent.agent_id}/enable", writer)
    document = _described(server)

    everything = call(server, "get", "/audit/events", writer, limit=200)
    _matches(document, everything, "/audit/events", "get")
    events = everything.json()["events"]
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs, reverse=True)
    assert seqs[-1] == 1
    disabled = call(server, "get", "/audit/events", writer, kind="agent.disabled").json()["events"]
    assert [e["kind"] for e in disabled] == ["agent.disabled", "agent.disabled"]
    assert all(e["agentId"] == agent.agent_id or e["subjectId"] == agent.agent_id for e in disabled)

    seen: list[int] = []
    cursor: str | None = None
    while True:
        page = call(
            server, "get", "/audit/events", writer, limit=3, **({"cursor": cursor} if cursor else {})
        ).json()
        seen.extend(event["seq"] for event in page["events"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == seqs
    problem(call(server, "get", "/audit/events", writer, cursor="nope"), 400, "invalid_cursor")
    problem(call(server, "get", "/audit/events", writer, kind="drop table"), 400, "invalid_input")
    problem(call(server, "get", "/audit/events", writer, agent=outsider.agent_id), 404, "agent_not_found")


def test_connections_and_approvals(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], step_up="0.001", name="c")
    grant_id = make_connection(db, server, agent.agent_id, name="nightly robot")
    held = reserve_now(db, agent.agent_id, facts("held"), SystemClock().now())
    assert held.approval is not None
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    document = _described(server)

    listed = call(server, "get", "/connections", reader)
    _matches(document, listed, "/connections", "get")
    (connection,) = listed.json()["connections"]
    assert (connection["id"], connection["clientName"], connection["agentId"]) == (
        grant_id,
        "nightly robot",
        agent.agent_id,
    )
    problem(call(server, "delete", f"/connections/{grant_id}", reader), 403, "insufficient_scope")
    revoked = call(server, "delete", f"/connections/{grant_id}", writer)
    _matches(document, revoked, "/connections/{connection_id}", "delete")
    assert revoked.json()["id"] == grant_id
    assert call(server, "get", "/connections", reader).json() == {"connections": []}
    problem(call(server, "delete", f"/connections/{grant_id}", writer), 404, "connection_not_found")
    kinds = [e["kind"] for e in call(server, "get", "/audit/events", reader, kind="oauth.").json()["events"]]
    assert kinds[0] == "oauth.grant_revoked"

    approvals = call(server, "get", "/approvals", reader, status="pending")
    _matches(document, approvals, "/approvals", "get")
    (pending,) = approvals.json()["approvals"]
    assert (pending["id"], pending["status"], pending["amountUsd"]) == (held.approval.id, "pending", "0.01")
    assert pending["decideAt"].endswith(f"/approvals/{held.approval.id}")
    one = call(server, "get", f"/approvals/{held.approval.id}", reader)
    _matches(document, one, "/approvals/{approval_id}", "get")
    assert one.json() == pending
    assert call(server, "get", "/approvals", reader, status="denied").json() == {"approvals": []}
    problem(call(server, "get", "/approvals/appr_missing", reader), 404, "approval_not_found")
    problem(call(server, "get", "/approvals", reader, status="maybe"), 400, "invalid_input")


def test_a_policy_narrows_through_the_api_and_widening_waits_for_sudo(
    server: RunningServer, db: Database
) -> None:
    hosts = ["api.example.com", "b.example.com"]
    agent = make_agent(db, server.settings, allow_hosts=hosts, daily_cap="7.00", max_per_tx="1.00", name="n")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    policy_path = f"/agents/{agent.agent_id}/policy"
    document = _described(server)
    start = call(server, "get", policy_path, writer).json()

    problem(
        call(server, "patch", policy_path, reader, body={"dailyCapUsd": "5.00"}), 403, "insufficient_scope"
    )
    lowered = call(server, "patch", policy_path, writer, body={"dailyCapUsd": "5.00", "maxUsdPerTx": "0.50"})
    _matches(document, lowered, policy_path.replace(agent.agent_id, "{agent_id}"), "patch")
    assert lowered.json()["policyVersion"] == start["policyVersion"] + 1
    assert (lowered.json()["policy"]["dailyCapUsd"], lowered.json()["policy"]["maxUsdPerTx"]) == (
        "5.00",
        "0.50",
    )
    narrower = call(
        server,
        "patch",
        policy_path,
        writer,
        body={"allowHosts": ["api.example.com"], "denyHosts": ["evil.example.com"]},
    )
    assert narrower.status_code == 200, narrower.text
    assert narrower.json()["policy"]["allowHosts"] == ["api.example.com"]
    assert narrower.json()["policy"]["denyHosts"] == ["evil.example.com"]
    version = narrower.json()["policyVersion"]

    # Widening: a higher cap, a host added, a denial removed. Each waits for a member's passkey.
    for widening in (
        {"dailyCapUsd": "6.00"},
        {"maxUsdPerTx": "0.60"},
        {"allowHosts": ["api.example.com", "new.example.com"]},
        {"denyHosts": ["other.example.com"]},
    ):
        waiting = call(server, "patch", policy_path, writer, body=widening)
        assert waiting.status_code == 202, waiting.text
        _matches(document, waiting, policy_path.replace(agent.agent_id, "{agent_id}"), "patch")
    assert call(server, "get", policy_path, writer).json()["policyVersion"] == version
    bad = problem(
        call(server, "patch", policy_path, writer, body={"dailyCapUsd": "lots"}), 400, "invalid_policy"
    )
    assert "daily-cap" in bad["detail"]
    kinds = [
        e["kind"] for e in call(server, "get", "/audit/events", reader, agent=agent.agent_id).json()["events"]
    ]
    assert kinds.count("policy.changed") >= 2
