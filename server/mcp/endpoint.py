"""/mcp as an ASGI app: stateful sessions for clients that open one, stateless for everything else.

A server can send a request to the client in the middle of a tool call (URL elicitation), and
know what the client declared, only on a stateful session of protocol 2025-11-25 or older. Such a
session lives in the memory of the process that opened it, so:

- an `initialize` request without `Mcp-Session-Id` opens a session (the answer carries its id);
- a request with `Mcp-Session-Id` goes to that session; a process that does not hold it answers
  404, so several processes need load-balancer affinity on `Mcp-Session-Id`;
- every other request (a client that never initializes, and every 2026-07-28 request, which has
  no sessions by design) is served statelessly by whichever process receives it.

A session is bound to the agent and organisation of the token that opened it: another agent's
token presenting its id gets the same 404 as an unknown id. For each request served on a session,
the scope carries an event set when the client disconnects, so a tool waiting for a person can
stop at once.
"""

from __future__ import annotations

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from auth.principal import Principal
from server.mcp.bearer import PRINCIPAL_KEY
from server.mcp.body import buffered, header, parsed

DISCONNECTED_KEY = "paywarden.disconnected"


class McpTransport:
    """Routes each /mcp request to the stateful or the stateless MCP server (same tools)."""

    def __init__(self, *, stateful: MCPServer, stateless: MCPServer) -> None:
        self.stateful = stateful
        self.stateless = stateless

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.stateless.session_manager.handle_request(scope, receive, send)
            return
        if scope.get("method") == "POST":
            # Read once, capped, here: the MCP server then reads the replay and never the client.
            _, receive = await buffered(scope, receive)
        version = header(scope, b"mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self.stateless.session_manager.handle_request(scope, receive, send)
            return
        if header(scope, b"mcp-session-id") is not None:
            await self._on_session(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await self.stateless.session_manager.handle_request(scope, receive, send)
            return
        body, receive = await buffered(scope, receive)
        if _is_initialize(parsed(body)):
            await self._on_session(scope, receive, send)
        else:
            await self.stateless.session_manager.handle_request(scope, receive, send)

    async def _on_session(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get(PRINCIPAL_KEY)
        if isinstance(principal, Principal):
            scope["user"] = _session_owner(principal)
        disconnected = anyio.Event()
        scope[DISCONNECTED_KEY] = disconnected

        async def watched() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
            return message

        try:
            await self.stateful.session_manager.handle_request(scope, watched, send)
        finally:
            disconnected.set()


def _session_owner(principal: Principal) -> AuthenticatedUser:
    """Who may use a session: the agent of the token that opened it (a refreshed token of the same
    agent keeps it)."""
    return AuthenticatedUser(
        AccessToken(
            token="",  # not a credential: only who owns the session matters
            client_id=str(principal.agent_id),
            subject=str(principal.agent_id),
            scopes=[],
            claims={"iss": str(principal.org_id)},
        )
    )


def _is_initialize(message: object) -> bool:
    return isinstance(message, dict) and message.get("method") == "initialize"
