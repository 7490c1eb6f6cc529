"""The approval lifecycle's rules not covered elsewhere: an approval covers one network and one
host, and its TTL is the organisation's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from server.kit.db import Database
from server.payments import decisions
from server.payments.errors import ApprovalMismatch
from server.tenancy.service import find_org, set_approval_ttl
from tests.support.clocks import written
from tests.support.ledger import authorize_held_now, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member

NOW = written(2026, 12, 2, 12, 0)


@pytest.mark.parametrize(
    "changed",
    [
        {"network": "eip155:8453"},
        {"host": "data.example.com"},
        {"path": "/v1/other"},
    ],
)
def test_another_network_host_or_resource_needs_a_new_approval(db: Database, changed: dict[str, str]) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=["api.example.com", "data.example.com"])
    member = make_member(db, setup.org_id, role="approver")
    held = reserve_now(db, setup.agent_id, facts("switch-001"), NOW)
    assert held.approval is not None
    assert held.intent is not None
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=held.approval.id,
            approve=True,
            member_ref=member,
            via="cli_break_glass",
            now=NOW,
        )
    with pytest.raises(ApprovalMismatch):
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("switch-001", **changed), NOW)  # type: ignore[arg-type]
    done = authorize_held_now(db, setup.agent_id, held.intent.id, facts("switch-001"), NOW)
    assert done.kind == "authorized"


@pytest.mark.parametrize("seconds", [300, 86_400])
def test_an_approval_waits_for_the_organisations_ttl(db: Database, seconds: int) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    with db.write() as session:
        org = find_org(session, OPERATOR, setup.org_id)
        set_approval_ttl(session, org=org, seconds=seconds, actor="test", now=NOW)
    held = reserve_now(db, setup.agent_id, facts(f"ttl-{seconds}"), NOW)
    assert held.approval is not None
    assert held.approval.expires_at == NOW + timedelta(seconds=seconds)
    assert held.intent is not None
    still = authorize_held_now(
        db, setup.agent_id, held.intent.id, facts(f"ttl-{seconds}"), NOW + timedelta(seconds=seconds - 1)
    )
    assert still.kind == "held"
