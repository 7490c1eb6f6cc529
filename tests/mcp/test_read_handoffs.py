"""A read tool's database work is one hand-off to a database thread per call, besides the bearer
check's own (one statement for the token and its agent's standing, never cached): counted on the
real server, per HTTP request, while get_budget and list_payments are called."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from server.kit.db import Database
from server.kit.request_ids import current_request_id
from tests.support.paywarden import RunningServer, mcp_client, structured
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.anyio]


def _name(fn: Callable[..., Any]) -> str:
    """The service a hand-off runs (Database.reading hands off its service inside a partial)."""
    while isinstance(fn, partial):
        inner = [arg for arg in fn.args if callable(arg)]
        fn = inner[0] if inner and fn.func.__name__.startswith("_") else fn.func
    return getattr(fn, "__name__", repr(fn))


@pytest.mark.parametrize(("tool", "service"), [("get_budget", "budget"), ("list_payments", "_payments_of")])
async def test_a_read_tool_hands_its_database_work_to_a_thread_once(
    paywarden: RunningServer, db: Database, monkeypatch: pytest.MonkeyPatch, tool: str, service: str
) -> None:
    setup = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"])
    handoffs: dict[str | None, list[str]] = defaultdict(list)
    run = Database.run

    async def counted(self: Database, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handoffs[current_request_id()].append(_name(fn))
        return await run(self, fn, *args, **kwargs)

    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        structured(await client.call_tool(tool, {}))  # warm
        monkeypatch.setattr(Database, "run", counted)
        structured(await client.call_tool(tool, {}))
        monkeypatch.undo()

    (calls,) = [names for names in handoffs.values() if service in names]
    assert calls == ["verify", service]
