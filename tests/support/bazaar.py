"""A facilitator's x402 Bazaar discovery endpoint for tests: `GET /discovery/resources`, answering
what Coinbase's x402 SDK's bazaar client expects (its own `DiscoveryResource.to_dict()` items,
paginated by `limit` and `offset`, filtered by `type`). Tests check with the SDK's own client
that it speaks the protocol, then point Paywarden's import at it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from x402.extensions.bazaar import DiscoveryResource

from tests.support.local_server import serve_asgi


@dataclass
class Bazaar:
    resources: list[DiscoveryResource]
    pages_served: list[tuple[int, int]] = field(default_factory=list)  # (limit, offset) asked
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def list_resources(self, request: Request) -> JSONResponse:
        wanted = request.query_params.get("type")
        limit = int(request.query_params.get("limit", "100"))
        offset = int(request.query_params.get("offset", "0"))
        self.pages_served.append((limit, offset))
        chosen = [item for item in self.resources if wanted is None or item.type == wanted]
        page = chosen[offset : offset + limit]
        document: dict[str, Any] = {
            "x402Version": 2,
            "items": [item.to_dict() for item in page],
            "pagination": {"limit": limit, "offset": offset, "total": len(chosen)},
        }
        return JSONResponse(document)


@contextmanager
def serve_bazaar(resources: list[DiscoveryResource]) -> Iterator[Bazaar]:
    bazaar = Bazaar(resources)
    app = Starlette(routes=[Route("/discovery/resources", bazaar.list_resources, methods=["GET"])])
    with serve_asgi(app) as port:
        bazaar.port = port
        yield bazaar
