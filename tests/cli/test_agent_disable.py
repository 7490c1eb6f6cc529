"""`paywarden admin agent disable|enable`: disabling means now. The agent's token is refused on its
next check, its pending approval ends as denied (`agent_disabled`) with its held payment closed,
an approved but unused one can no longer pay, and a new reservation is refused: nothing it started
is signed. Enabling lets it pay again; what disabling ended stays ended."""

from __future__ import annotations

import pytest
from sqlmodel import select

from auth.verifier import InvalidToken, TokenVerifier
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import Approval, AuditEvent, PaymentIntent
from server.payments.errors import AgentDisabled
from tests.support.cli import run_cli
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.tenants import make_agent


def _events(db: Database, org_id: str, type_: str) -> list[AuditEvent]:
    with db.read() as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id, AuditEvent.type == type_))
        return list(rows)


def test_disabling_an_agent_ends_what_could_still_pay(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    agent = make_agent(db, settings, allow_hosts=["api.example.com"], name="switched")
    now = SystemClock().now()
    held = reserve_now(db, agent.agent_id, facts("held-1"), now)
    assert held.kind == "held"
    assert held.approval is not None
    verifier = TokenVerifier(db, SystemClock())
    assert verifier.verify(agent.token, audience=settings.mcp_url).agent_id == agent.agent_id

    done = run_cli(db.url, "admin", "agent", "disable", agent.agent_id, "--json").json()
    assert done["disabled"] is True
    with pytest.raises(InvalidToken, match="disabled"):
        verifier.verify(agent.token, audience=settings.mcp_url)
    with db.read() as session:
        approval = session.get(Approval, held.approval.id)
        intent = session.get(PaymentIntent, held.approval.intent_id)
        assert approval is not None
        assert intent is not None
        assert approval.status == "denied"
        assert (intent.status, intent.failure_code) == ("failed", "agent_disabled")
    (denied,) = _events(db, agent.org_id, "approval.denied")
    assert denied.data["reason"] == "agent_disabled"
    with pytest.raises(AgentDisabled):
        reserve_now(db, agent.agent_id, facts("after-1"), SystemClock().now())
    # Disabling twice changes nothing more.
    run_cli(db.url, "admin", "agent", "disable", agent.agent_id, "--json").json()
    assert len(_events(db, agent.org_id, "agent.disabled")) == 1

    enabled = run_cli(db.url, "admin", "agent", "enable", agent.agent_id, "--json").json()
    assert enabled["disabled"] is False
    assert verifier.verify(agent.token, audience=settings.mcp_url).agent_id == agent.agent_id
    assert reserve_now(db, agent.agent_id, facts("after-2"), SystemClock().now()).intent is not None
    with db.read() as session:
        again = session.get(Approval, held.approval.id)
        assert again is not None
        assert again.status == "denied"
    assert len(_events(db, agent.org_id, "agent.enabled")) == 1
