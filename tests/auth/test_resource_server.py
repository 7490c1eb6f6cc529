"""/mcp as a resource server: 401 challenges that name the metadata and the scopes, 403 step-up
challenges naming every scope a call needs (from the JSON-RPC body and the Mcp-Name header), the
tool error for tokens issued on the command line, and a connection's "last used"."""

from __future__ import annotations

import pytest
from sqlmodel import select

from auth.scopes import AGENT_SCOPES, TOOL_SCOPES, Scope
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import OAuthGrant
from tests.support.oauth import Person, call_tool, connect, mcp_post, rpc_result
from tests.support.paywarden import RunningServer, error_of, mcp_client
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio

ALL = "catalog:read payments:read payments:write policy:request rules:propose"


def _challenge(header: str) -> dict[str, str]:
    assert header.startswith("Bearer ")
    parts = {}
    for item in header[len("Bearer ") :].split('", '):
        name, _, value = item.partition("=")
        parts[name.strip()] = value.strip('"')
    return parts


def test_a_missing_token_is_challenged_with_the_metadata_and_the_scopes(server: RunningServer) -> None:
    answer = mcp_post(
        server.settings.mcp_url, "", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"Authorization": ""}
    )
    assert answer.status_code == 401
    challenge = _challenge(answer.headers["www-authenticate"])
    assert challenge["resource_metadata"] == server.settings.resource_metadata_url
    assert challenge["scope"] == ALL
    assert "offline_access" not in answer.headers["www-authenticate"]


def test_a_token_without_a_tools_scope_gets_a_step_up_challenge(server: RunningServer, owner: Person) -> None:
    _, tokens = connect(server, owner, scopes=["payments:read"])
    assert rpc_result(call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget"))["result"]
    answer = call_tool(
        server.settings.mcp_url, tokens["access_token"], "fetch_paid", {"url": "https://api.example.com/x"}
    )
    assert answer.status_code == 403
    challenge = _challenge(answer.headers["www-authenticate"])
    assert challenge["error"] == "insufficient_scope"
    assert challenge["scope"] == "payments:write"
    assert challenge["resource_metadata"] == server.settings.resource_metadata_url
    # A client that ignores the challenge still reads the stable error in the JSON-RPC answer.
    body = answer.json()
    assert body["id"] == 7
    assert body["error"]["data"]["error"] == {
        "code": "insufficient_scope",
        "message": "The access token does not carry the scope this tool needs.",
        "scope": "payments:write",
    }


def test_the_challenge_names_every_scope_the_call_needs(server: RunningServer, owner: Person) -> None:
    _, tokens = connect(server, owner, scopes=["payments:read"])
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "fetch_paid", "arguments": {}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "propose_rule", "arguments": {}},
        },
    ]
    answer = mcp_post(server.settings.mcp_url, tokens["access_token"], batch)  # type: ignore[arg-type]
    assert answer.status_code == 403
    assert _challenge(answer.headers["www-authenticate"])["scope"] == "payments:write rules:propose"
    assert [reply["id"] for reply in answer.json()] == [1, 2]


def test_the_mcp_name_header_of_a_2026_request_is_read_too(server: RunningServer, owner: Person) -> None:
    _, tokens = connect(server, owner, scopes=["payments:read"])
    message = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "get_budget", "arguments": {}},
    }
    answer = mcp_post(
        server.settings.mcp_url,
        tokens["access_token"],
        message,
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "propose_rule"},
    )
    assert answer.status_code == 403
    # The call needs both tools' scopes (the header and the body disagree): both are named.
    assert _challenge(answer.headers["www-authenticate"])["scope"] == "payments:read rules:propose"


def test_a_token_with_the_scope_passes_through(server: RunningServer, owner: Person) -> None:
    _, tokens = connect(server, owner, scopes=["payments:read", "rules:propose"])
    result = rpc_result(
        call_tool(
            server.settings.mcp_url,
            tokens["access_token"],
            "propose_rule",
            {"kind": "deny_host", "host": "bad.example", "reason": "The user asked."},
        )
    )
    assert "result" in result


async def test_a_command_line_token_gets_the_tool_error_for_every_tool(
    server: RunningServer, sqlite_db: Database
) -> None:
    for tool, needed in TOOL_SCOPES.items():
        others = frozenset(AGENT_SCOPES - needed) or frozenset({Scope.CATALOG_READ})
        token = make_agent(
            sqlite_db, server.settings, allow_hosts=["api.example.com"], scopes=others, clock=server.clock
        ).token
        async with mcp_client(server.settings.mcp_url, token) as client:
            listed = {item.name for item in (await client.list_tools()).tools}
            if tool not in listed:
                continue  # a tool of a later feature: its scope is ready for it
            error = error_of(await client.call_tool(tool, {}))
        assert error["code"] == "insufficient_scope", tool
        assert error["scope"] == " ".join(sorted(needed)), tool


async def test_every_tool_has_its_scopes_declared(server: RunningServer, sqlite_db: Database) -> None:
    token = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"], clock=server.clock).token
    async with mcp_client(server.settings.mcp_url, token) as client:
        listed = {item.name for item in (await client.list_tools()).tools}
    assert listed <= set(TOOL_SCOPES)


def test_a_connections_last_use_is_recorded(
    server: RunningServer, owner: Person, sqlite_db: Database, clock: FrozenClock
) -> None:
    _, tokens = connect(server, owner)
    clock.advance(600)
    assert rpc_result(call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget"))["result"]
    with sqlite_db.read() as session:
        grants = session.exec(select(OAuthGrant).where(OAuthGrant.agent_id == owner.agent.agent_id)).all()
    assert [grant.last_used_at for grant in grants] == [clock.now()]
    assert clock.now().strftime("%Y-%m-%d %H:%M") in owner.browser.get("/connections").text
