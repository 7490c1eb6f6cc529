"""MCP clients that declare URL elicitation, and a person's decision made by another process.

`decide` is the one step a waiting test needs from a person: today the break-glass command line
in its own process; swap it for the approval page when that exists.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult

from tests.support.cli import PAYWARDEN, command_environ

LEGACY = "legacy"  # the initialize handshake: protocol 2025-11-25, on a stateful session
MODERN = "2026-07-28"  # no sessions: the multi-round-trip pattern


class UrlElicitations:
    """An elicitation callback that records each request and answers with `action`."""

    def __init__(self, action: Literal["accept", "decline", "cancel"] = "accept") -> None:
        self.action = action
        self.requests: list[ElicitRequestParams] = []
        self.asked = anyio.Event()

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
    async with http, Client(transport, mode=mode, elicitation_callback=elicitations) as client:
        yield client


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
