"""Calling the admin API of a running server in tests: tokens, requests and problem checks."""

from __future__ import annotations

from typing import Any

import httpx

from auth.clients import admin_client_grant, create_admin_client
from auth.scopes import Scope
from auth.tokens import issue_access_token
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.tenancy.service import get_agent
from tests.support.paywarden import RunningServer
from tests.support.principals import OPERATOR

PROBLEM = "application/problem+json"


def admin_token(
    db: Database, server: RunningServer, org_id: str, scopes: frozenset[Scope], *, agent_id: str | None = None
) -> str:
    """A token for /api/v1 (an agent's, with `agent_id`: such a token opens nothing there)."""
    with db.write() as session:
        return issue_access_token(
            session,
            org_id=org_id,
            agent_id=agent_id,
            scopes=scopes,
            audience=server.settings.admin_api_audience,
            ttl_seconds=3600,
            created_by="test",
            now=SystemClock().now(),
        ).token


def call(
    server: RunningServer,
    method: str,
    path: str,
    token: str | None,
    *,
    body: Any = None,
    **params: Any,
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"{server.settings.admin_api_audience}{path}"
    return httpx.request(method.upper(), url, headers=headers, params=params, json=body, timeout=30)


def problem(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    body = answer.json()
    assert body["type"] == f"urn:paywarden:problem:{code}"
    assert (body["status"], body["code"]) == (status, code)
    assert body["detail"]
    return dict(body)


def make_connection(db: Database, server: RunningServer, agent_id: str, name: str = "robot") -> str:
    """A live connection (an operator's client_credentials client and its grant); its grant id."""
    with db.write() as session:
        agent = get_agent(session, OPERATOR, agent_id)
        created = create_admin_client(
            session,
            agent=agent,
            name=name,
            scopes=frozenset({Scope.PAYMENTS_READ}),
            resource=server.settings.mcp_url,
            actor="test",
            now=SystemClock().now(),
        )
        grant = admin_client_grant(session, created.row)
        assert grant is not None
        return grant.id
