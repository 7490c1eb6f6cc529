"""The admin API's seller circuits: the hosts the organisation blocked after paid calls that
delivered nothing, and a member's clearing of one (no tool can clear a circuit)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.principal import Principal
from server.payments.circuits import open_circuits
from server.policy.service import SudoRequired
from server.web.api.parts import now_of, reading
from server.web.api.schemas import CircuitDocument, CircuitList


def _list(session: Session, principal: Principal, *, now: datetime) -> CircuitList:
    return CircuitList(
        circuits=[CircuitDocument.of(row) for row in open_circuits(session, principal, now=now)]
    )


async def list_circuits(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _list, principal, now=now_of(request))


async def clear_seller_circuit(request: Request, principal: Principal) -> BaseModel:
    """Clearing lets the agents pay a seller that took money without delivering again: it widens
    what they may pay, so it is made on the dashboard, after a passkey (sudo), never with a token."""
    raise SudoRequired(widens=("a blocked seller",))
