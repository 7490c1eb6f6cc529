"""Tools are built once per process; each server's copy is bound to that server's own services."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from mcp_types import CallToolResult
from prometheus_client import REGISTRY

from server.mcp.content import error_result, ok_result
from server.mcp.registry import ToolRegistry
from server.mcp.server import build_mcp_server
from server.payments.errors import PolicyDenied
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
        assert len(first_tools) == 10
        assert first_tools == second_tools  # names, descriptions, input and output schemas
        for name in first_tools:
            mine, theirs = first._tool_manager.get_tool(name), second._tool_manager.get_tool(name)
            assert mine is not None
            assert theirs is not None
            assert mine.fn is not theirs.fn
            # The tool's own function, under the layer that counts its calls (server/kit/metrics.py).
            assert inspect.getclosurevars(inspect.unwrap(mine.fn)).nonlocals["services"] is first_services
            assert inspect.getclosurevars(inspect.unwrap(theirs.fn)).nonlocals["services"] is second_services
    finally:
        await first_services.aclose()
        await second_services.aclose()


def _count(tool: str, outcome: str) -> float:
    return REGISTRY.get_sample_value("paywarden_tool_calls_total", {"tool": tool, "outcome": outcome}) or 0.0


@pytest.mark.anyio
async def test_each_call_is_counted_by_its_outcome() -> None:
    registry = ToolRegistry()
    answers: list[Any] = [
        ok_result({"fine": True}),
        error_result(PolicyDenied().as_dict()),
        RuntimeError("a bug"),
    ]

    @registry.tool(name="counted_probe", description="A tool for this test.")
    async def counted_probe() -> CallToolResult:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, CallToolResult)
        return answer

    tool = registry.tools[0]
    before = {
        outcome: _count("counted_probe", outcome) for outcome in ("ok", "policy_denied", "internal_error")
    }
    await tool.fn()
    await tool.fn()
    with pytest.raises(RuntimeError):
        await tool.fn()
    for outcome, count in before.items():
        assert _count("counted_probe", outcome) == count + 1, outcome
