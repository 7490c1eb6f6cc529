"""The /mcp request as the middleware in front of the MCP server reads it: its headers, and its
POST body read once, capped (server/kit/bodies.py), kept in the ASGI scope and replayed to
whatever reads it next. Bearer authentication looks for the tools a batch calls and the
transport for `initialize` in the same bytes; the MCP server then reads them from the replay."""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Receive, Scope

from server.kit.bodies import MCP_LIMIT, read_capped, replay

BODY_KEY = "paywarden.mcp_body"


def header(scope: Scope, name: bytes) -> str | None:
    """A request header's value (stripped), or None when it is missing or not latin-1 text."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            try:
                return str(value.decode("latin-1")).strip()
            except UnicodeDecodeError:
                return None
    return None


async def buffered(scope: Scope, receive: Receive) -> tuple[bytes, Receive]:
    """The body, and the receive that hands it on: read from the client the first time (raising
    RequestTooLarge past MCP_LIMIT), from the scope after that."""
    kept = scope.get(BODY_KEY)
    if isinstance(kept, bytes):
        return kept, receive
    body = await read_capped(receive, limit=MCP_LIMIT)
    scope[BODY_KEY] = body
    return body, replay(body, receive)


def parsed(body: bytes) -> Any:
    """The body's JSON, or None when it is empty or not JSON."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None
