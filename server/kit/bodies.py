"""Request bodies with a size known before they are held: every body any endpoint reads goes
through here.

`BodyLimit` wraps the whole application. A request whose `Content-Length` is over its path's
limit is refused on the first read, before a byte of its body is taken from the connection; a
body without a length (chunked) is counted as it arrives and refused once it passes the limit.
Either way the reader gets `RequestTooLarge` and has held at most the limit. Endpoints count
their rate limit before they read, so an oversized request still counts.

`read_capped` is the one way to hold a whole body (the /mcp endpoint inspects its JSON-RPC
body before the MCP server reads it again through `replay`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.kit.errors import PaywardenError

KIB = 1024
# A page's JSON post or form, an OAuth registration, token, revocation or introspection request.
DEFAULT_LIMIT = 64 * KIB
# A JSON-RPC batch on /mcp: a make_paid_request body may be 256 KB before JSON escapes it.
MCP_LIMIT = 4 * KIB * KIB


class RequestTooLarge(PaywardenError):
    code = "request_too_large"
    message = "This request is too large for Paywarden to read."
    status: ClassVar[int] = 413


def declared_length(scope: Scope) -> int | None:
    """The request's `Content-Length`, or None when it has none (or one that is not a number,
    which the HTTP server refuses itself)."""
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def capped(receive: Receive, *, limit: int, declared: int | None) -> Receive:
    """`receive`, raising RequestTooLarge at the first read when the declared length is over
    `limit`, and as soon as the bytes received pass it."""
    received = 0

    async def read() -> Message:
        nonlocal received
        if declared is not None and declared > limit:
            raise RequestTooLarge()
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise RequestTooLarge()
        return message

    return read


async def read_capped(receive: Receive, *, limit: int) -> bytes:
    """The whole body, or RequestTooLarge once it passes `limit` (the running count stops it
    even when no `BodyLimit` is in front)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """The body read already, then whatever the client does next (a disconnect, eventually)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class BodyLimit:
    """Caps every request's body at its path's limit (see the module's docstring). A refused
    request's answer closes the connection, so the rest of a huge body is never read."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(str(scope.get("path", "")))
        refused = False
        inner = capped(receive, limit=limit, declared=declared_length(scope))

        async def watched() -> Message:
            nonlocal refused
            try:
                return await inner()
            except RequestTooLarge:
                refused = True
                raise

        async def closing(message: Message) -> None:
            if refused and message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, watched, closing)


def limit_for_path(path: str) -> int:
    return MCP_LIMIT if path == "/mcp" or path.startswith("/mcp/") else DEFAULT_LIMIT
