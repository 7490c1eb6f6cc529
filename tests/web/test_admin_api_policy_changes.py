"""The policy changes agents asked for, through the admin API: an admin token reads them (the
note marked as the agent's untrusted words, the page where they are decided), each answer
matching the OpenAPI document; nothing of another organisation is visible; and no token, an
admin's or an agent's, has a route that decides one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES, Scope
from server.approvals.policy_changes import ask_for_change
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.policy.requested_changes import parse_requested_change
from tests.support.admin_api import admin_token, call, problem
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import AgentSetup, make_agent

NOTE = "Needs <b>reports</b>: the user asked."


@pytest.fixture(name="server")
def fixture_server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def _ask(db: Database, agent: AgentSetup, change: dict[str, Any]) -> str:
    principal = Principal.for_agent(
        org_id=agent.org_id, agent_id=agent.agent_id, token_id="t", scopes=AGENT_SCOPES
    )
    with db.write() as session:
        row, _ = ask_for_change(
            session,
            principal,
            agent_id=agent.agent_id,
            change=parse_requested_change(change),
            note=NOTE,
            now=SystemClock().now(),
        )
    return row.id


def _matches(server: RunningServer, answer: httpx.Response, path: str) -> None:
    document = httpx.get(f"{server.settings.admin_api_audience}/openapi.json", timeout=30).json()
    described = document["paths"][path]["get"]["responses"][str(answer.status_code)]["content"]
    schema = described[answer.headers["content-type"].split(";")[0]]["schema"]
    jsonschema.validate(answer.json(), {**schema, "components": document["components"]})


def test_an_admin_token_reads_what_agents_asked_for_and_decides_nothing(
    server: RunningServer, sqlite_db: Database
) -> None:
    first = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"], name="first")
    second = make_agent(
        sqlite_db, server.settings, allow_hosts=["api.example.com"], org_id=first.org_id, name="second"
    )
    outsider = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"], name="outsider")
    older = _ask(sqlite_db, first, {"dailyCapUsd": "20"})
    newer = _ask(sqlite_db, second, {"addAllowHosts": ["reports.example.com"]})
    foreign = _ask(sqlite_db, outsider, {"dailyCapUsd": "20"})
    reader = admin_token(sqlite_db, server, first.org_id, frozenset({Scope.ADMIN_READ}))

    listed = call(server, "get", "/policy-changes", reader)
    assert listed.status_code == 200, listed.text
    _matches(server, listed, "/policy-changes")
    assert [item["id"] for item in listed.json()["policyChanges"]] == [newer, older]
    only = call(server, "get", "/policy-changes", reader, agent=first.agent_id).json()["policyChanges"]
    assert [item["id"] for item in only] == [older]
    one = call(server, "get", f"/policy-changes/{older}", reader)
    _matches(server, one, "/policy-changes/{change_id}")
    assert one.json() | {"createdAt": None, "expiresAt": None} == {
        "id": older,
        "status": "pending",
        "agentId": first.agent_id,
        "change": {"dailyCapUsd": "20.00"},
        "note": {"untrusted": True, "text": NOTE},
        "policyVersion": 2,
        "appliedPolicyVersion": None,
        "createdAt": None,
        "expiresAt": None,
        "decidedAt": None,
        "decidedBy": None,
        "decideAt": f"{server.settings.pages_url}/policy-changes/{older}",
    }
    problem(call(server, "get", f"/policy-changes/{foreign}", reader), 404, "policy_change_not_found")
    problem(call(server, "get", "/policy-changes", reader, agent=outsider.agent_id), 404, "agent_not_found")

    writer = admin_token(sqlite_db, server, first.org_id, frozenset({Scope.ADMIN_WRITE}))
    agents_own = admin_token(sqlite_db, server, first.org_id, AGENT_SCOPES, agent_id=first.agent_id)
    for method in ("post", "patch", "put", "delete"):
        for path in (f"/policy-changes/{older}", f"/policy-changes/{older}/approve", "/policy-changes"):
            answer = call(server, method, path, writer, body={"decision": "approve"})
            assert answer.status_code in (404, 405), (method, path, answer.status_code)
    # An agent's token opens nothing here: its MCP token is for another audience, and one minted
    # for this API carries no admin scope.
    problem(call(server, "get", f"/policy-changes/{older}", first.token), 401, "invalid_token")
    problem(call(server, "get", f"/policy-changes/{older}", agents_own), 403, "insufficient_scope")
    assert call(server, "get", f"/policy-changes/{older}", reader).json()["status"] == "pending"
