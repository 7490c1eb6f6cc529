"""Bearer authentication in front of /mcp, as pure ASGI middleware (not the MCP SDK's, which
challenges without `scope=` and one scope at a time).

- No usable token: 401 with `WWW-Authenticate: Bearer resource_metadata="...", scope="..."`,
  pointing at the RFC 9728 document and naming the scopes an agent's token may carry, so an
  OAuth client can discover where and what to ask for.
- A token the authorization server issued that lacks a scope the call needs: 403 with
  `error="insufficient_scope"` and, in one challenge, every scope the call needs, so the client
  can step up (ask the person again). The tool is read from the JSON-RPC body (`tools/call` and
  its `name`), and from `Mcp-Name` on 2026-07-28 requests. The body also carries the same stable
  error as a JSON-RPC error, for clients that ignore the challenge.
- A token issued on the command line has no client that could step up: its missing scopes are
  left to the tool, which answers with the tool error `insufficient_scope`.

A valid token's principal is put in the ASGI scope for the tools to read. The bearer token itself
never goes further than this process: nothing passes it to a seller.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES, scope_text, scopes_needed
from auth.verifier import InvalidToken, TokenVerifier
from server.mcp.body import buffered, header, parsed
from server.mcp.errors import InsufficientScope

PRINCIPAL_KEY = "paywarden.principal"
BEARER_KEY = "paywarden.bearer"
INSUFFICIENT_SCOPE_RPC_CODE = -32003
# Writing "last used" is throttled per token in this process too; the database keeps the truth.
_NOTE_EVERY_S = 60.0


class BearerAuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: TokenVerifier,
        audience: str,
        resource_metadata_url: str,
        alias_of: Callable[[str], str | None] = lambda _netloc: None,
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.audience = audience
        self.resource_metadata_url = resource_metadata_url
        # The origin a request's Host is another loopback spelling of, if it is one (its challenge
        # points at the metadata under that spelling, which names /mcp as the client knows it).
        self.alias_of = alias_of
        self._noted: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = header(scope, b"authorization")
        metadata_url = self._metadata_url(scope)
        if authorization is None:
            await self._challenge(send, metadata_url, error=None, description="Authentication required.")
            return
        kind, _, token = authorization.partition(" ")
        if kind.lower() != "bearer" or not token.strip():
            await self._challenge(
                send, metadata_url, error="invalid_request", description="Use the Bearer scheme."
            )
            return
        try:
            principal = await self.verifier.verify_async(token.strip(), audience=self.audience)
        except InvalidToken as exc:
            await self._challenge(send, metadata_url, error="invalid_token", description=exc.description)
            return
        if principal.agent_id is None:
            await self._challenge(
                send, metadata_url, error="invalid_token", description="Only agent tokens may use /mcp."
            )
            return
        scope[PRINCIPAL_KEY] = principal
        scope[BEARER_KEY] = token.strip()
        await self._note_use(principal)
        if principal.client_id is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, receive = await buffered(scope, receive)
        calls = _tool_calls(body, header(scope, b"mcp-method"), header(scope, b"mcp-name"))
        needed = scopes_needed(name for name, _ in calls)
        if needed - principal.scopes:
            await self._step_up(
                send,
                metadata_url,
                needed=needed,
                ids=list(dict.fromkeys(request_id for _, request_id in calls)),
            )
            return
        await self.app(scope, receive, send)

    async def _note_use(self, principal: Principal) -> None:
        if principal.client_id is None or principal.token_id is None:
            return
        last = self._noted.get(principal.token_id)
        now = time.monotonic()
        if last is not None and now - last < _NOTE_EVERY_S:
            return
        if len(self._noted) > 10_000:
            self._noted.clear()
        self._noted[principal.token_id] = now
        await self.verifier.note_use_async(principal)

    def _metadata_url(self, scope: Scope) -> str:
        alias = self.alias_of((header(scope, b"host") or "").strip())
        if alias is None:
            return self.resource_metadata_url
        return f"{alias}/.well-known/oauth-protected-resource/mcp"

    async def _challenge(self, send: Send, metadata_url: str, *, error: str | None, description: str) -> None:
        parts = [f'resource_metadata="{metadata_url}"', f'scope="{scope_text(AGENT_SCOPES)}"']
        if error is not None:
            parts = [f'error="{error}"', f'error_description="{description}"', *parts]
        body = {"error": error or "unauthorized", "error_description": description}
        await _answer(send, 401, body, [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())])

    async def _step_up(self, send: Send, metadata_url: str, *, needed: Iterable[Any], ids: list[Any]) -> None:
        scopes = scope_text(needed)
        challenge = (
            'Bearer error="insufficient_scope", '
            f'scope="{scopes}", '
            f'resource_metadata="{metadata_url}", '
            'error_description="The access token does not carry every scope this call needs."'
        )
        error = InsufficientScope(scope=scopes).as_dict()
        replies = [
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {
                    "code": INSUFFICIENT_SCOPE_RPC_CODE,
                    "message": error["message"],
                    "data": {"error": error},
                },
            }
            for request_id in ids
        ]
        body: Any = replies[0] if len(replies) == 1 else replies
        await _answer(send, 403, body, [(b"www-authenticate", challenge.encode())])


def _tool_calls(body: bytes, method_header: str | None, name_header: str | None) -> list[tuple[str, Any]]:
    """(tool name, JSON-RPC id) of every tools/call in the body, and the one `Mcp-Name` names."""
    calls: list[tuple[str, Any]] = []
    document = parsed(body)
    messages = document if isinstance(document, list) else [document]
    first_id: Any = None
    for message in messages:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if first_id is None:
            first_id = message.get("id")
        if isinstance(name, str):
            calls.append((name, message.get("id")))
    if name_header and method_header == "tools/call":
        calls.append((name_header, first_id))
    return calls


async def _answer(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
