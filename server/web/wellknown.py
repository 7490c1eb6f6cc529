"""Discovery documents, served without authentication and with CORS so browser-based clients can
read them: RFC 9728 protected resource metadata for /mcp (at the root and path-inserted well-known
URLs) and RFC 8414 authorization server metadata."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from auth import metadata
from server.settings import Settings
from server.web.http import CORS_HEADERS, Endpoint, preflight


def protected_resource_metadata(settings: Settings) -> dict[str, object]:
    return metadata.protected_resource(resource=settings.mcp_url, issuer=settings.public_url)


def _document(body: dict[str, object]) -> Endpoint:
    async def handle(_request: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "max-age=300", **CORS_HEADERS})

    return handle


def routes(settings: Settings) -> list[BaseRoute]:
    resource = _document(protected_resource_metadata(settings))
    server = _document(metadata.authorization_server(issuer=settings.public_url))
    found: list[BaseRoute] = []
    for path, endpoint in (
        ("/.well-known/oauth-protected-resource", resource),
        ("/.well-known/oauth-protected-resource/mcp", resource),
        ("/.well-known/oauth-authorization-server", server),
    ):
        found.append(Route(path, endpoint=endpoint, methods=["GET"]))
        found.append(Route(path, endpoint=preflight, methods=["OPTIONS"]))
    return found
