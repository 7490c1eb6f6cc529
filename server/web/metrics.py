"""`/metrics`: the Prometheus text of this host's processes, and what the database says now.

No label names an organisation, an agent, a host, a URL or an amount (server/kit/metrics.py), so
the page tells nothing about any one customer; it still tells how busy the deployment is. With
PAYWARDEN_METRICS_TOKEN set, a scrape must carry it as a bearer token; without it the page is open,
for a scraper inside the cluster, and the way in from outside must not route it (docs/operations.md).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

import anyio.to_thread
from pydantic import SecretStr
from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from server.audit.service import newest_event_at
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.metrics import CONTENT_TYPE, Snapshot, exposition
from server.payments.census import payments_by_state

log = logging.getLogger("paywarden.metrics")


def _authorized(request: Request, token: SecretStr | None) -> bool:
    if token is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected)


async def _snapshot(db: Database, clock: Clock) -> Snapshot:
    try:
        by_state = await db.reading(payments_by_state)
        newest: datetime | None = await db.reading(newest_event_at)
    except SQLAlchemyError:
        # The process's own numbers are still worth a scrape; /readyz says the database is down.
        log.warning("metrics: the database did not answer, its numbers are left out")
        return Snapshot()
    age = None if newest is None else max((clock.now() - newest).total_seconds(), 0.0)
    return Snapshot(payments_by_state=by_state, audit_head_age_s=age)


def metrics(db: Database, clock: Clock, token: SecretStr | None) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        if not _authorized(request, token):
            return JSONResponse(
                {"error": "unauthorized", "error_description": "/metrics needs the metrics token."},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        snapshot = await _snapshot(db, clock)
        # In multiprocess mode the numbers are read from files: off the event loop.
        body = await anyio.to_thread.run_sync(exposition, snapshot)
        return Response(body, headers={"Content-Type": CONTENT_TYPE})

    return handle
