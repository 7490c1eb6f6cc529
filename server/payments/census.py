"""How many payments are in each state, over every organisation: what `/metrics` reports."""

from __future__ import annotations

from sqlmodel import Session

from server.payments.repository import IntentRepository


def payments_by_state(session: Session) -> dict[str, int]:
    return IntentRepository(session).count_by_state()
