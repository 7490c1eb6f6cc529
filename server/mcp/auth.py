"""Bearer authentication in front of /mcp, as pure ASGI middleware.

A request without a usable token gets 401 with `WWW-Authenticate: Bearer resource_metadata=...`
pointing at the RFC 9728 document, so OAuth-capable clients can discover how to sign in. A valid
token's principal is put in the ASGI scope for the tools to read.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from auth.verifier import InvalidToken, TokenVerifier

PRINCIPAL_KEY = "paywarden.principal"
BEARER_KEY = "paywarden.bearer"


class BearerAuthMiddleware:
    def __init__(
        self, app: ASGIApp, *, verifier: TokenVerifier, audience: str, resource_metadata_url: str
    ) -> None:
        self.app = app
        self.verifier = verifier
        self.audience = audience
        self.resource_metadata_url = resource_metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = _authorization(scope)
        if header is None:
            await self._challenge(send, error=None, description="Authentication required.")
            return
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            await self._challenge(send, error="invalid_request", description="Use the Bearer scheme.")
            return
        try:
            principal = await self.verifier.verify_async(token.strip(), audience=self.audience)
        except InvalidToken as exc:
            await self._challenge(send, error="invalid_token", description=exc.description)
            return
        if principal.agent_id is None:
            await self._challenge(send, error="invalid_token", description="Only agent tokens may use /mcp.")
            return
        scope[PRINCIPAL_KEY] = principal
        scope[BEARER_KEY] = token.strip()
        await self.app(scope, receive, send)

    async def _challenge(self, send: Send, *, error: str | None, description: str) -> None:
        parts = [f'resource_metadata="{self.resource_metadata_url}"']
        if error is not None:
            parts = [f'error="{error}"', f'error_description="{description}"', *parts]
        body = json.dumps({"error": error or "unauthorized", "error_description": description}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", ("Bearer " + ", ".join(parts)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _authorization(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            try:
                return str(value.decode("latin-1"))
            except UnicodeDecodeError:
                return None
    return None
