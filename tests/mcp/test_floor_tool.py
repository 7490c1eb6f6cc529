"""The benchmarks' floor tool (tests/bench/floor.py) exists only in the app the benchmarks serve:
`paywarden serve`, configured as a deployment is, lists no such tool and refuses a call to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.kit.db import Database
from tests.bench import floor
from tests.bench.servers import paywarden
from tests.support.oauth import call_tool
from tests.support.paywarden import mcp_client, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio


async def test_paywarden_serve_has_no_floor_tool(sqlite_db: Database, tmp_path: Path) -> None:
    with paywarden(sqlite_db.url, tmp_path / "server") as served:
        token = make_agent(sqlite_db, served.settings, allow_hosts=["127.0.0.1"]).token
        async with mcp_client(served.mcp_url, token) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            refused = await client.call_tool(floor.NAME, {})
    assert "get_budget" in listed
    assert floor.NAME not in listed
    assert refused.is_error


async def test_the_floor_app_serves_the_floor_next_to_paywardens_tools(
    sqlite_db: Database, tmp_path: Path
) -> None:
    with paywarden(sqlite_db.url, tmp_path / "server", floor=True) as served:
        token = make_agent(sqlite_db, served.settings, allow_hosts=["127.0.0.1"]).token
        async with mcp_client(served.mcp_url, token) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            answer = structured(await client.call_tool(floor.NAME, {}))
            budget = structured(await client.call_tool("get_budget", {}))
        stranger = call_tool(served.mcp_url, "pw_at_not-a-token", floor.NAME)
    assert stranger.status_code == 401  # the same bearer check as every tool
    assert answer == {"ok": True}
    assert "agentId" in budget
    assert tools[floor.NAME].output_schema is not None  # the SDK checks the result against it
    assert tools[floor.NAME].input_schema["type"] == "object"
