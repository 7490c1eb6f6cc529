"""/mcp serves a stateful session to a client that opens one and answers everything else
statelessly: a session belongs to the agent whose token opened it, an unknown session is a 404,
and requests without a session (2026-07-28 ones included) work without one."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from server.kit.db import Database
from tests.support.elicitation import MODERN, RawSession, eliciting_client
from tests.support.paywarden import RunningServer, serve, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio


@pytest.fixture(name="server")
def fixture_server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url) as server:
        yield server


async def test_a_session_belongs_to_the_agent_that_opened_it(
    server: RunningServer, sqlite_db: Database
) -> None:
    mine = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])
    theirs = make_agent(
        sqlite_db, server.settings, allow_hosts=["api.example.com"], org_id=mine.org_id, name="b"
    )
    async with httpx.AsyncClient(timeout=30) as http:
        session = RawSession(http, server.mcp_url, mine.token)
        session_id = await session.initialize({})
        for _ in range(3):
            assert (await session.call_tool("get_budget", {}))["structuredContent"][
                "agentId"
            ] == mine.agent_id

        stranger = RawSession(http, server.mcp_url, theirs.token)
        stranger.headers["Mcp-Session-Id"] = session_id
        assert (await stranger.post("tools/list", {})).status_code == 404
        unknown = RawSession(http, server.mcp_url, mine.token)
        unknown.headers["Mcp-Session-Id"] = "0" * 32
        assert (await unknown.post("tools/list", {})).status_code == 404

        # Without a session: served statelessly, no session id handed out.
        stateless = RawSession(http, server.mcp_url, mine.token)
        result = await stateless.call_tool("get_budget", {})
        assert result["structuredContent"]["agentId"] == mine.agent_id

        ended = await http.delete(server.mcp_url, headers=session.headers)
        assert ended.status_code == 200
        assert (await session.post("tools/list", {})).status_code == 404


async def test_modern_requests_need_no_session(server: RunningServer, sqlite_db: Database) -> None:
    setup = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])
    async with eliciting_client(server.mcp_url, setup.token, mode=MODERN, elicitations=None) as client:
        assert client.protocol_version == MODERN
        budget = structured(await client.call_tool("get_budget", {}))
    assert budget["agentId"] == setup.agent_id
