"""Small HTTP helpers shared by the OAuth endpoints and the pages: CORS for documents and
endpoints browser-based clients call, OAuth answers as responses, rate limits as 429s."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.errors import RateLimited
from auth.oauth_server import HttpAnswer
from auth.rate_limits import Limit, count_request
from server.kit.bodies import DEFAULT_LIMIT, read_capped
from server.services import Services

CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "86400",
}
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}

Endpoint = Callable[[Request], Awaitable[Response]]


def services_of(request: Request) -> Services:
    services = request.app.state.services
    assert isinstance(services, Services)
    return services


def client_address(request: Request) -> str:
    """Who is asking, for rate limits: the connecting address (behind a proxy, the proxy's)."""
    return request.client.host if request.client else "unknown"


async def preflight(_request: Request) -> Response:
    return Response(status_code=204, headers=CORS_HEADERS)


def oauth_response(answer: HttpAnswer, *, cors: bool = True) -> Response:
    headers = dict(answer.headers)
    if cors:
        headers.update(CORS_HEADERS)
    if isinstance(answer.body, dict):
        headers.pop("Content-Type", None)
        return JSONResponse(answer.body, status_code=answer.status, headers=headers)
    return Response(answer.body or b"", status_code=answer.status, headers=headers)


def rate_limited_json(error: RateLimited, *, cors: bool = True) -> Response:
    retry = str(error.extra.get("retry_after", 60))
    headers = {"Retry-After": retry, **NO_STORE, **(CORS_HEADERS if cors else {})}
    body = {"error": error.code, "error_description": error.message}
    return JSONResponse(body, status_code=429, headers=headers)


async def count(request: Request, limit: Limit, who: str | None = None) -> None:
    """Count this request against `limit` in the database; raises RateLimited when over."""
    services = services_of(request)
    await services.db.writing(
        count_request, limit=limit, who=who or client_address(request), now=services.clock.now()
    )


async def json_body(request: Request, *, max_bytes: int = DEFAULT_LIMIT) -> Any:
    """The request's JSON, or None when it is not JSON. Raises RequestTooLarge past `max_bytes`,
    having held no more than that; count the request's rate limit before calling this."""
    body = await read_capped(request.receive, limit=max_bytes)
    try:
        return json.loads(body)
    except ValueError:
        return None
