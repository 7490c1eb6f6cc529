"""The admin API under /api/v1, against a real server: an admin token of one organisation reads
that organisation's agents, payments and audit chain and nothing of another's; every refusal is a
problem document; pages follow their cursor; the OpenAPI document describes every answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest

from auth.scopes import Scope
from auth.tokens import issue_access_token
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.web.api.routes import OPERATIONS
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import AgentSetup, make_agent

ROUTES = ["/agents", "/agents/{agent}", "/payments", "/audit/verify"]
PROBLEM = "application/problem+json"


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def _admin_token(db: Database, server: RunningServer, org_id: str, scopes: frozenset[Scope]) -> str:
    with db.write() as session:
        return issue_access_token(
            session,
            org_id=org_id,
            agent_id=None,
            scopes=scopes,
            audience=server.settings.admin_api_audience,
            ttl_seconds=3600,
            created_by="test",
            now=SystemClock().now(),
        ).token


def _get(server: RunningServer, path: str, token: str | None, **params: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"{server.settings.admin_api_audience}{path}"
    return httpx.get(url, headers=headers, params=params, timeout=30)


def _pay(db: Database, agent: AgentSetup, count: int, prefix: str) -> list[str]:
    now = SystemClock().now()
    made = [reserve_now(db, agent.agent_id, facts(f"{prefix}-{n}"), now).intent for n in range(count)]
    assert all(intent is not None for intent in made)
    return [intent.id for intent in made if intent is not None]


def _problem(answer: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"].startswith(PROBLEM)
    body = answer.json()
    assert body["type"] == f"urn:paywarden:problem:{code}"
    assert (body["status"], body["code"]) == (status, code)
    assert body["detail"]
    return dict(body)


def test_an_admin_token_reads_its_organisation_and_nothing_of_another(
    server: RunningServer, db: Database
) -> None:
    a1 = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="a1")
    a2 = make_agent(db, server.settings, allow_hosts=["api.example.com"], org_id=a1.org_id, name="a2")
    b1 = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="b1")
    paid_a = _pay(db, a1, 2, "a1") + _pay(db, a2, 1, "a2")
    _pay(db, b1, 2, "b1")
    token_a = _admin_token(db, server, a1.org_id, frozenset({Scope.ADMIN}))

    agents = _get(server, "/agents", token_a)
    assert agents.status_code == 200, agents.text
    assert [agent["name"] for agent in agents.json()["agents"]] == ["a1", "a2"]
    assert _get(server, f"/agents/{a1.agent_id}", token_a).json()["id"] == a1.agent_id

    payments = _get(server, "/payments", token_a).json()
    assert sorted(item["id"] for item in payments["payments"]) == sorted(paid_a)
    assert payments["nextCursor"] is None
    only_a2 = _get(server, "/payments", token_a, agent=a2.agent_id).json()["payments"]
    assert [item["agentId"] for item in only_a2] == [a2.agent_id]
    intact = {"intact": True, "brokenAtSeq": None, "reason": None}
    assert _get(server, "/audit/verify", token_a).json() == intact

    # Organisation B's agent does not exist for organisation A's token, by id or as a filter.
    _problem(_get(server, f"/agents/{b1.agent_id}", token_a), 404, "agent_not_found")
    _problem(_get(server, "/payments", token_a, agent=b1.agent_id), 404, "agent_not_found")


def test_pages_follow_their_cursor_newest_first(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="pager")
    paid = _pay(db, agent, 5, "page")
    token = _admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN}))
    seen: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = _get(server, "/payments", token, **params).json()
        seen.extend(page["payments"])
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == 3
    assert sorted(item["id"] for item in seen) == sorted(paid)
    order = [(item["createdAt"], item["id"]) for item in seen]
    assert order == sorted(order, reverse=True)
    _problem(_get(server, "/payments", token, cursor="not-a-cursor"), 400, "invalid_cursor")
    _problem(_get(server, "/payments", token, limit=0), 400, "invalid_input")
    _problem(_get(server, "/payments", token, status="paid-ish"), 400, "invalid_input")
    _problem(_get(server, "/payments", token, since="yesterday"), 400, "invalid_input")


def test_without_an_admin_token_every_route_is_refused(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="outsider")
    no_scope = _admin_token(db, server, agent.org_id, frozenset({Scope.PAYMENTS_READ}))
    for route in ROUTES:
        path = route.format(agent=agent.agent_id)
        missing = _problem(_get(server, path, None), 401, "invalid_token")
        assert missing["detail"].startswith("Send an admin token")
        assert _get(server, path, None).headers["www-authenticate"].startswith("Bearer")
        # The agent's own MCP token was issued for /mcp, not for this API.
        _problem(_get(server, path, agent.token), 401, "invalid_token")
        _problem(_get(server, path, "pw_at_" + "x" * 43), 401, "invalid_token")
        _problem(_get(server, path, no_scope), 403, "insufficient_scope")


def _start_of_a_window(window_s: int, needed_s: float) -> None:
    """Wait, if need be, until `needed_s` seconds of one fixed rate-limit window (aligned on the
    epoch, as the server's are) lie ahead: requests that straddle two windows count in both."""
    left = window_s - time.time() % window_s
    if left < needed_s:
        time.sleep(left + 0.05)


def test_the_rate_limit_answers_429_with_retry_after(db: Database) -> None:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "3"}) as limited:
        agent = make_agent(db, limited.settings, allow_hosts=["api.example.com"], name="busy")
        token = _admin_token(db, limited, agent.org_id, frozenset({Scope.ADMIN}))
        _start_of_a_window(60, needed_s=20)
        answers = [_get(limited, "/agents", token) for _ in range(4)]
        assert [answer.status_code for answer in answers] == [200, 200, 200, 429]
        _problem(answers[-1], 429, "rate_limited")
        assert int(answers[-1].headers["retry-after"]) > 0


def test_the_openapi_document_describes_every_answer(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="described")
    _pay(db, agent, 1, "described")
    token = _admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN}))
    document = httpx.get(f"{server.settings.admin_api_audience}/openapi.json", timeout=30).json()
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": server.settings.admin_api_audience}]
    # Every route of the table is described under its method, these reads among them.
    assert {(path, method) for path, item in document["paths"].items() for method in item} == {
        (operation.path, operation.method) for operation in OPERATIONS
    }
    assert {route.replace("{agent}", "{agent_id}") for route in ROUTES} <= set(document["paths"])
    components = document["components"]

    def check(answer: httpx.Response, status: str, path: str) -> None:
        described = document["paths"][path]["get"]["responses"][status]["content"]
        (media,) = described.values()
        schema = {**media["schema"], "components": components}
        jsonschema.validate(answer.json(), schema)

    check(_get(server, "/agents", token), "200", "/agents")
    check(_get(server, f"/agents/{agent.agent_id}", token), "200", "/agents/{agent_id}")
    check(_get(server, "/agents/agent_missing", token), "404", "/agents/{agent_id}")
    check(_get(server, "/payments", token), "200", "/payments")
    check(_get(server, "/payments", token, limit=999), "400", "/payments")
    check(_get(server, "/audit/verify", token), "200", "/audit/verify")
    check(_get(server, "/audit/verify", None), "401", "/audit/verify")
