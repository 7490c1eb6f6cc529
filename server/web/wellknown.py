"""RFC 9728 protected resource metadata for /mcp."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from auth.scopes import AGENT_SCOPES
from server.settings import Settings


def protected_resource_metadata(settings: Settings) -> dict[str, object]:
    return {
        "resource": settings.mcp_url,
        "authorization_servers": [settings.public_url],
        "scopes_supported": sorted(AGENT_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Paywarden",
    }


def endpoint(settings: Settings) -> object:
    async def handle(_request: Request) -> JSONResponse:
        return JSONResponse(protected_resource_metadata(settings), headers={"Cache-Control": "max-age=300"})

    return handle
