"""The request id: taken from a well-formed X-Request-Id or made new, answered, on every log record
of the request, in worker threads too, and in the data of the audit events the request writes."""

from __future__ import annotations

import logging
import re
from typing import Any

import anyio.to_thread
import httpx
import pytest
from sqlmodel import Session
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from server.audit.service import first_broken_link, record
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.kit.request_ids import RequestIdFilter, RequestIdMiddleware, current_request_id
from server.models import AuditEvent
from server.tenancy.service import create_org

pytestmark = pytest.mark.anyio

log = logging.getLogger("paywarden.test")


async def _echo(_request: Request) -> JSONResponse:
    log.warning("serving")
    in_thread = await anyio.to_thread.run_sync(current_request_id)
    return JSONResponse({"seen": current_request_id(), "inThread": in_thread})


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


APP = Starlette(routes=[Route("/", _echo)], middleware=[Middleware(RequestIdMiddleware)])


@pytest.mark.parametrize("offered", ["abc-123", "4bf92f3577b34da6a3ce929d0e0e4736", "req:1.2_3", "a" * 64])
async def test_a_well_formed_request_id_is_kept_and_answered(offered: str) -> None:
    async with _client(APP) as client:
        answer = await client.get("/", headers={"X-Request-Id": offered})
    assert answer.headers["x-request-id"] == offered
    assert answer.json() == {"seen": offered, "inThread": offered}


@pytest.mark.parametrize(
    "offered", ["", "a" * 65, "has space", "line\nbreak", 'quote"d', "ünicode", "a/b", "pw_at_x?y=1&z"]
)
async def test_a_malformed_request_id_is_replaced_by_a_new_one(offered: str) -> None:
    async with _client(APP) as client:
        answer = await client.get("/", headers={b"X-Request-Id": offered.encode("utf-8")})
    answered = answer.headers["x-request-id"]
    assert answered != offered
    assert re.fullmatch(r"[0-9a-f]{32}", answered)
    assert answer.json()["seen"] == answered


async def test_without_a_header_each_request_gets_its_own_id() -> None:
    async with _client(APP) as client:
        first = (await client.get("/")).headers["x-request-id"]
        second = (await client.get("/")).headers["x-request-id"]
    assert first != second
    assert current_request_id() is None  # nothing is left behind outside the request


async def test_every_log_record_of_the_request_carries_its_id(caplog: pytest.LogCaptureFixture) -> None:
    caplog.handler.addFilter(RequestIdFilter())
    with caplog.at_level(logging.WARNING, logger="paywarden.test"):
        async with _client(APP) as client:
            await client.get("/", headers={"X-Request-Id": "logged-1"})
        log.warning("outside")
    ids = {record.getMessage(): getattr(record, "request_id", None) for record in caplog.records}
    assert ids == {"serving": "logged-1", "outside": "-"}


def _audit(session: Session, *, org_id: str) -> AuditEvent:
    return record(
        session, org_id=org_id, type="test.event", actor="test", data={"n": 1}, now=SystemClock().now()
    )


async def test_an_audit_event_written_by_a_request_names_it_and_the_chain_verifies(
    sqlite_db: Database,
) -> None:
    with sqlite_db.write() as session:
        org_id = create_org(session, name="acme", actor="test", now=SystemClock().now()).id

    async def write(_request: Request) -> JSONResponse:
        event = await sqlite_db.writing(_audit, org_id=org_id)
        return JSONResponse({"data": event.data})

    app = Starlette(
        routes=[Route("/", write, methods=["POST"])], middleware=[Middleware(RequestIdMiddleware)]
    )
    async with _client(app) as client:
        inside = (await client.post("/", headers={"X-Request-Id": "audited-1"})).json()["data"]
    assert inside == {"n": 1, "requestId": "audited-1"}

    outside = await sqlite_db.writing(_audit, org_id=org_id)
    assert outside.data == {"n": 1}
    with sqlite_db.read() as session:
        assert first_broken_link(session, org_id) is None
