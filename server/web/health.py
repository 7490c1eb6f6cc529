"""Liveness and readiness: ready means the database answers and its schema is current."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from server.kit.db import Database
from server.kit.migrations import schema_is_current


async def healthz(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def readyz(db: Database) -> object:
    async def handle(_request: Request) -> JSONResponse:
        try:
            current = await db.run(schema_is_current, db)
        except Exception:
            return JSONResponse({"status": "unavailable", "database": "unreachable"}, status_code=503)
        if not current:
            return JSONResponse({"status": "unavailable", "database": "schema_behind"}, status_code=503)
        return JSONResponse({"status": "ready"})

    return handle
