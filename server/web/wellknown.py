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


def protected_resource_metadata(settings: Settings, *, netloc: str | None = None) -> dict[str, object]:
    """The document for /mcp. Asked for by the public URL's other loopback spelling, it names /mcp
    under that spelling (a client checks the resource against the URL it was given); the issuer,
    and so every page a person sees, stays the one public URL."""
    alias = settings.loopback_alias(netloc) if netloc else None
    resource = f"{alias}/mcp" if alias else settings.mcp_url
    return metadata.protected_resource(resource=resource, issuer=settings.public_url)


def _document(body: dict[str, object]) -> Endpoint:
    async def handle(_request: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "max-age=300", **CORS_HEADERS})

    return handle


def _resource_document(settings: Settings) -> Endpoint:
    async def handle(request: Request) -> Response:
        body = protected_resource_metadata(settings, netloc=request.headers.get("host"))
        return JSONResponse(body, headers={"Cache-Control": "max-age=300", **CORS_HEADERS})

    return handle


def routes(settings: Settings) -> list[BaseRoute]:
    resource = _resource_document(settings)
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
