"""The /mcp endpoint as a client meets it: discovery, bearer checks, scopes, tool declarations."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from auth.scopes import Scope
from auth.tokens import issue_access_token
from server.kit.clock import SystemClock
from server.kit.db import Database
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio


# These tests need only a fresh organisation and agent each: they share one server and one SQLite
# database per module (docs/development.md, "Sharing a server").
@pytest.fixture(name="sqlite_db")
def fixture_sqlite_db(module_sqlite_db: Database) -> Database:
    return module_sqlite_db


@pytest.fixture(scope="module")
def server(module_sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(module_sqlite_db.url) as running:
        yield running


def test_protected_resource_metadata_is_served(server: RunningServer) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        document = httpx.get(server.public_url + path).json()
        assert document["resource"] == server.settings.mcp_url
        assert document["authorization_servers"] == [server.settings.public_url]
        assert "payments:write" in document["scopes_supported"]


@pytest.mark.parametrize(
    ("authorization", "error"),
    [
        (None, None),
        ("Basic dXNlcjpwdw==", "invalid_request"),
        ("Bearer pw_at_" + "x" * 43, "invalid_token"),
        ("Bearer not-a-token", "invalid_token"),
    ],
)
def test_a_request_without_a_usable_token_gets_401_pointing_at_the_metadata(
    server: RunningServer, authorization: str | None, error: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.post(
        server.settings.mcp_url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
    )
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{server.settings.resource_metadata_url}"' in challenge
    if error is None:
        assert "error=" not in challenge
    else:
        assert f'error="{error}"' in challenge


def _token(db: Database, server: RunningServer, *, audience: str, agent: bool = True) -> str:
    setup = make_agent(db, server.settings, allow_hosts=["api.example.com"])
    with db.write() as session:
        issued = issue_access_token(
            session,
            org_id=setup.org_id,
            agent_id=setup.agent_id if agent else None,
            scopes=frozenset({Scope.PAYMENTS_READ}) if agent else frozenset({Scope.ADMIN}),
            audience=audience,
            ttl_seconds=600,
            created_by="test",
            now=SystemClock().now(),
        )
    return issued.token


def test_tokens_for_another_audience_or_without_an_agent_are_refused(
    server: RunningServer, sqlite_db: Database
) -> None:
    for token in (
        _token(sqlite_db, server, audience="https://other.example/mcp"),
        _token(sqlite_db, server, audience=server.settings.mcp_url, agent=False),
        _token(sqlite_db, server, audience=server.settings.admin_api_audience, agent=False),
    ):
        response = httpx.post(
            server.mcp_url,
            headers={"Authorization": f"Bearer {token}"},
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        )
        assert response.status_code == 401
        assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_foreign_host_header_is_refused(server: RunningServer, sqlite_db: Database) -> None:
    token = _token(sqlite_db, server, audience=server.settings.mcp_url)
    response = httpx.post(
        server.mcp_url,
        headers={
            "Authorization": f"Bearer {token}",
            "Host": "evil.example",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
    )
    assert response.status_code == 421


async def test_every_tool_declares_schemas_and_annotations(
    server: RunningServer, sqlite_db: Database
) -> None:
    token = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"]).token
    async with mcp_client(server.mcp_url, token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"fetch_paid", "get_budget"} <= set(tools)
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is not None
        assert tool.annotations.destructive_hint is not None
        assert tool.annotations.idempotent_hint is not None
        assert tool.annotations.open_world_hint is not None
    assert tools["fetch_paid"].annotations.read_only_hint is False  # type: ignore[union-attr]
    assert tools["fetch_paid"].annotations.open_world_hint is True  # type: ignore[union-attr]
    assert tools["get_budget"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["fetch_paid"].input_schema["properties"]["url"]["type"] == "string"


async def test_a_token_without_the_tools_scope_gets_insufficient_scope(
    server: RunningServer, sqlite_db: Database
) -> None:
    token = make_agent(
        sqlite_db, server.settings, allow_hosts=["api.example.com"], scopes=frozenset({Scope.PAYMENTS_READ})
    ).token
    async with mcp_client(server.mcp_url, token) as client:
        assert structured(await client.call_tool("get_budget", {}))["capLevel"] == "ok"
        error = error_of(await client.call_tool("fetch_paid", {"url": "https://api.example.com/x"}))
    assert error == {
        "code": "insufficient_scope",
        "message": "The access token does not carry the scope this tool needs.",
        "scope": "payments:write",
    }


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({}, "invalid_url"),
        ({"url": 42}, "invalid_url"),
        ({"url": "ftp://api.example.com/x"}, "https_required"),
        ({"url": "http://api.example.com/x"}, "https_required"),
        ({"url": "https://u:p@api.example.com/x"}, "url_credentials"),
        ({"url": "https://api.example.com/x", "maxAmountUsd": "-1"}, "invalid_max_amount"),
        ({"url": "https://api.example.com/x", "method": "TRACE"}, "invalid_method"),
        ({"url": "https://api.example.com/x", "body": "x"}, "body_not_allowed"),
        ({"url": "https://api.example.com/x", "headers": {"Authorization": "x"}}, "reserved_header"),
        ({"url": "https://api.example.com/x", "idempotencyKey": "short"}, "invalid_idempotency_key"),
    ],
)
async def test_bad_input_is_invalid_input_with_a_reason(
    server: RunningServer, sqlite_db: Database, arguments: dict[str, object], reason: str
) -> None:
    token = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"]).token
    async with mcp_client(server.mcp_url, token) as client:
        error = error_of(await client.call_tool("fetch_paid", arguments))
    assert error["code"] == "invalid_input"
    assert error["reason"] == reason


async def test_the_agents_own_token_in_the_input_is_refused(
    server: RunningServer, sqlite_db: Database
) -> None:
    token = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"]).token
    async with mcp_client(server.mcp_url, token) as client:
        error = error_of(
            await client.call_tool("fetch_paid", {"url": f"https://api.example.com/x?k={token}"})
        )
    assert error["reason"] == "contains_credential"
