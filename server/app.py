"""The Starlette application: /mcp behind bearer authentication, discovery, the authorization
server and members' pages, and health endpoints.

The MCP endpoint serves a stateful session to a client that opens one with `initialize` (protocol
2025-11-25 and older: what lets a tool ask the person through URL elicitation mid-call) and answers
every other request statelessly (server/mcp/endpoint.py). Requests that need no session can go
to any process; a session's requests must reach the process that holds it (affinity on
`Mcp-Session-Id`).
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import eth_account  # noqa: F401 - signing code loads it on first use; a server loads it at start
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from server.jobs.runner import JobRunner
from server.kit.bodies import BodyLimit, RequestTooLarge, limit_for_path
from server.kit.clock import Clock
from server.kit.loading import loaded
from server.kit.logs import configure_logging
from server.kit.metrics import process_stopping
from server.kit.migrations import current_revision, head_revision
from server.kit.request_ids import RequestIdMiddleware
from server.kit.stopping import reserve_seconds, watching
from server.mcp.bearer import BearerAuthMiddleware
from server.mcp.endpoint import McpTransport
from server.mcp.server import ToolModule, build_mcp_server
from server.services import Services, build_services
from server.settings import Settings, load_settings
from server.signers.cdp_api import sdk_loaded
from server.wallets.cdp import any_cdp_wallet
from server.wallets.master_key import open_master_key
from server.web import health, metrics
from server.web.errors import http_error, server_error, too_large
from server.web.routes import routes as web_routes


class SchemaBehind(RuntimeError):
    pass


def transport_security(settings: Settings) -> TransportSecuritySettings:
    public = urlsplit(settings.public_url)
    origin = f"{public.scheme}://{public.netloc}"
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[public.netloc, "127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=[origin, "http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    services: Services | None = None,
    extra_tools: Sequence[ToolModule] = (),
) -> Starlette:
    """The application. `extra_tools` adds tool modules to both MCP servers; no setting does, so
    `paywarden serve` (`create_app_from_env`) serves Paywarden's tools only."""
    services = services or build_services(settings, clock=clock)
    security = transport_security(settings)
    stateful = build_mcp_server(services, extra_tools=extra_tools)
    stateless = build_mcp_server(services, extra_tools=extra_tools)
    stateful.streamable_http_app(stateless_http=False, transport_security=security)
    stateless.streamable_http_app(stateless_http=True, transport_security=security)
    mcp_endpoint = BearerAuthMiddleware(
        McpTransport(stateful=stateful, stateless=stateless),
        verifier=services.verifier,
        audience=settings.mcp_url,
        resource_metadata_url=settings.resource_metadata_url,
        alias_of=settings.loopback_alias,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, Any]]:
        current = await services.db.run(current_revision, services.db)
        if current != head_revision():
            raise SchemaBehind("the database schema is behind: run `paywarden migrate`")
        # Another master key than the database's own stops the process here, before it serves.
        await services.db.run(open_master_key, services.db, settings, clock=services.clock)
        runner = JobRunner(db=services.db, clock=services.clock, jobs=services.jobs)
        # SIGTERM reaches this app through `paywarden serve` (server/kit/stopping.py).
        services.stopping.bind()
        try:
            with watching(services.stopping):
                async with (
                    stateful.session_manager.run(),
                    stateless.session_manager.run(),
                    anyio.create_task_group() as background,
                ):
                    if settings.background_jobs:
                        background.start_soon(runner.run_forever)
                    if await services.db.reading(any_cdp_wallet):
                        # Seconds of CPU: in a worker thread now, not in the first CDP payment's way.
                        background.start_soon(sdk_loaded)
                    try:
                        yield {"services": services}
                    finally:
                        background.cancel_scope.cancel()
        finally:
            if settings.background_jobs:
                await runner.release()
            with anyio.CancelScope(shield=True):
                # Within what the grace period keeps for this, after the leases' release.
                await services.aclose(settle_wait_s=reserve_seconds(settings.shutdown_grace_seconds) * 0.8)
            process_stopping()

    routes = [
        Route("/mcp", endpoint=mcp_endpoint, methods=["GET", "POST", "DELETE"]),
        Route("/healthz", endpoint=health.healthz, methods=["GET"]),
        Route("/readyz", endpoint=health.readyz(services.db), methods=["GET"]),  # type: ignore[arg-type]
        Route(
            "/metrics",
            endpoint=metrics.metrics(services.db, services.clock, settings.metrics_token),
            methods=["GET"],
        ),
        *web_routes(settings),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        # Every body is capped where it is read (server/kit/bodies.py); a reader that meets the
        # cap and is not a page (which says it itself) answers 413 `request_too_large`.
        # The request id first, so that everything after it, errors included, logs under it.
        middleware=[Middleware(RequestIdMiddleware), Middleware(BodyLimit, limit_for=limit_for_path)],
        exception_handlers={
            404: http_error,
            405: http_error,
            500: server_error,
            RequestTooLarge: too_large,
        },
    )
    app.state.services = services
    return app


def create_app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving."""
    settings = load_settings()
    configure_logging(settings.log_format)
    # The lifespan's end removes this process's live gauges; this also covers a start that failed.
    atexit.register(process_stopping)
    app = create_app(settings)
    loaded()  # what serve loaded with the garbage collector off is frozen (server/kit/loading.py)
    return app
