"""MCP clients that declare URL elicitation, and a person's decision made by another process.

`call_while_deciding` calls a tool and, once the client was asked, lets a person decide while the
call waits: `decide` is that person on the break-glass command line, in its own process; the page
tests pass a member on the approval page in Chromium (tests/support/approval_page.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CallToolResult,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
)

from tests.support.cli import PAYWARDEN, command_environ

LEGACY = "legacy"  # the initialize handshake: protocol 2025-11-25, on a stateful session
MODERN = "2026-07-28"  # no sessions: the multi-round-trip pattern


class UrlElicitations:
    """An elicitation callback that records each request and answers with `action`, and a message
    handler that records the ids of `notifications/elicitation/complete`."""

    def __init__(self, action: Literal["accept", "decline", "cancel"] = "accept") -> None:
        self.action = action
        self.requests: list[ElicitRequestParams] = []
        self.asked = anyio.Event()
        self.completed: list[str] = []

    async def notified(self, message: object) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)

    async def __call__(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.requests.append(params)
        self.asked.set()
        return ElicitResult(action=self.action)

    def only(self) -> ElicitRequestURLParams:
        (request,) = self.requests
        assert isinstance(request, ElicitRequestURLParams), request
        return request


@asynccontextmanager
async def eliciting_client(
    url: str, token: str, *, mode: str, elicitations: UrlElicitations | None
) -> AsyncIterator[Client]:
    """The official client at `mode`, declaring elicitation (form and URL, as the SDK does) only
    when `elicitations` is given."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    transport = streamable_http_client(url, http_client=http)
    handler = elicitations.notified if elicitations is not None else None
    async with (
        http,
        Client(transport, mode=mode, elicitation_callback=elicitations, message_handler=handler) as client,
    ):
        yield client


ASKED_TIMEOUT_S = 20


def approval_id_of(request: ElicitRequestURLParams) -> str:
    """The approval an elicited URL opens (`<public URL>/approvals/<id>`)."""
    return request.url.rsplit("/", 1)[1]


async def call_while_deciding(
    client: Client,
    arguments: dict[str, Any],
    elicitations: UrlElicitations,
    decider: Callable[[ElicitRequestURLParams], Awaitable[object]],
    *,
    tool: str = "fetch_paid",
) -> CallToolResult:
    """Call `tool` (fetch_paid, pay_x402 or request_policy_change); once the client was asked (one
    URL elicitation), `decider` decides it while the call waits (it must not have returned when the
    decision starts; it may return as soon as the decision is committed, before the decider itself
    is done). Returns the call's result, which shows whether it saw the decision (`paid`, or
    `signed`, only after an approval)."""
    result: list[CallToolResult] = []

    async def call() -> None:
        result.append(await client.call_tool(tool, arguments))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        with anyio.fail_after(ASKED_TIMEOUT_S):
            await elicitations.asked.wait()
        assert not result, "the call returned before the person decided"
        await decider(elicitations.only())
    return result[0]


async def decide(database_url: str, approval_id: str, *, member: str, approve: bool) -> dict[str, Any]:
    """A member's decision on a held payment, written by another process (the command line)."""
    result = await anyio.run_process(
        [
            PAYWARDEN,
            "admin",
            "approvals",
            "decide",
            approval_id,
            "approve" if approve else "deny",
            "--member",
            member,
            "--json",
        ],
        env=command_environ(database_url=database_url, env={"PAYWARDEN_PUBLIC_URL": "http://127.0.0.1:8402"}),
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode()
    decided = json.loads(result.stdout)
    assert isinstance(decided, dict)
    return decided


class RawSession:
    """JSON-RPC over HTTP by hand at 2025-11-25, to declare exactly the capabilities a test wants."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self.http, self.url = http, url
        self.headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        self._ids = 0

    async def initialize(self, capabilities: dict[str, Any]) -> str:
        opened = await self.post(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        assert opened.status_code == 200, opened.text
        self.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        notified = await self.http.post(
            self.url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert notified.status_code == 202
        return self.headers["Mcp-Session-Id"]

    async def post(self, method: str, params: dict[str, Any]) -> httpx.Response:
        self._ids += 1
        message = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        return await self.http.post(self.url, headers=self.headers, json=message)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's result (the last JSON-RPC answer in the response, SSE or JSON)."""
        response = await self.post("tools/call", {"name": name, "arguments": arguments})
        assert response.status_code == 200, response.text
        if response.headers.get("content-type", "").startswith("application/json"):
            answer = response.json()
        else:
            data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
            answer = json.loads(
                next(item for item in reversed(data) if '"result"' in item or '"error"' in item)
            )
        assert "result" in answer, answer
        result = answer["result"]
        assert isinstance(result, dict)
        return result
