"""The admin API's seller circuits: the hosts the organisation blocked after paid calls that
delivered nothing, and a member's clearing of one (no tool can clear a circuit)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.principal import Principal
from server.payments.circuits import clear_circuit, open_circuits
from server.web.api.parts import now_of, path, reading, writing
from server.web.api.schemas import CircuitDocument, CircuitList


def _list(session: Session, principal: Principal, *, now: datetime) -> CircuitList:
    return CircuitList(
        circuits=[CircuitDocument.of(row) for row in open_circuits(session, principal, now=now)]
    )


async def list_circuits(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _list, principal, now=now_of(request))


def _clear(session: Session, principal: Principal, host: str, *, now: datetime) -> CircuitDocument:
    return CircuitDocument.of(clear_circuit(session, principal, host=host, now=now))


async def clear_seller_circuit(request: Request, principal: Principal) -> BaseModel:
    return await writing(request, _clear, principal, path(request, "host"), now=now_of(request))
