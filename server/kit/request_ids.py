"""The request id: one per HTTP request, in every log line it causes and every audit event it writes.

A client or a proxy may send its own `X-Request-Id`; it is kept when it is well-formed (1 to 64
letters, digits, `-`, `_`, `.`, `:`), so one id follows a call through the proxy's logs and ours.
Anything else is replaced by a new id: a header is never copied blindly into a log or the audit
log. The id is answered in the response's `X-Request-Id` header, and lives in a contextvar that
worker threads (database work runs in them) inherit.
"""

from __future__ import annotations

import logging
import re
import secrets
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-request-id"
_WELL_FORMED = re.compile(r"^[A-Za-z0-9._:\-]{1,64}$")
_CURRENT: ContextVar[str | None] = ContextVar("paywarden.request_id", default=None)


def current_request_id() -> str | None:
    return _CURRENT.get()


def new_request_id() -> str:
    return secrets.token_hex(16)


def accepted_request_id(offered: str | None) -> str:
    """The offered id if it is well-formed, else a new one."""
    if offered is not None and _WELL_FORMED.match(offered):
        return offered
    return new_request_id()


class RequestIdMiddleware:
    """Sets the request id for everything the request does, and answers it in a header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        offered = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                offered = value.decode("latin-1")
                break
        request_id = accepted_request_id(offered)
        token = _CURRENT.set(request_id)

        async def with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, with_header)
        finally:
            _CURRENT.reset(token)


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record (`-` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _CURRENT.get() or "-"
        return True
