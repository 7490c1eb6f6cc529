"""Tools are built once per process; each server's copy is bound to that server's own services."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from server.mcp.server import build_mcp_server
from server.services import build_services
from tests.support.paywarden import settings_for


@pytest.mark.anyio
async def test_two_servers_list_the_same_tools_each_bound_to_its_own_services(tmp_path: Path) -> None:
    first_services = build_services(settings_for(database_url=f"sqlite:///{tmp_path}/a.db", port=1))
    second_services = build_services(settings_for(database_url=f"sqlite:///{tmp_path}/b.db", port=2))
    try:
        first, second = build_mcp_server(first_services), build_mcp_server(second_services)
        first_tools = {tool.name: tool for tool in await first.list_tools()}
        second_tools = {tool.name: tool for tool in await second.list_tools()}
        assert len(first_tools) == 8
        assert first_tools == second_tools  # names, descriptions, input and output schemas
        for name in first_tools:
            mine, theirs = first._tool_manager.get_tool(name), second._tool_manager.get_tool(name)
            assert mine is not None
            assert theirs is not None
            assert mine.fn is not theirs.fn
            assert inspect.getclosurevars(mine.fn).nonlocals["services"] is first_services
            assert inspect.getclosurevars(theirs.fn).nonlocals["services"] is second_services
    finally:
        await first_services.aclose()
        await second_services.aclose()
