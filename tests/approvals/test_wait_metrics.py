"""How long approvals waited, in /metrics: from the hold to the person's decision, or to the expiry."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import REGISTRY

from server.kit.db import Database
from server.payments import decisions
from tests.support.clocks import written
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member

NOW = written(2026, 12, 3, 9, 0)


def _wait(outcome: str) -> tuple[float, float]:
    labels = {"outcome": outcome}
    count = REGISTRY.get_sample_value("paywarden_approval_wait_seconds_count", labels) or 0.0
    total = REGISTRY.get_sample_value("paywarden_approval_wait_seconds_sum", labels) or 0.0
    return count, total


def test_a_decided_approval_and_an_expired_one_are_timed(sqlite_db: Database) -> None:
    db = sqlite_db
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
    member = make_member(db, setup.org_id, role="approver")
    approved_before, expired_before = _wait("approved"), _wait("expired")

    held = reserve_now(db, setup.agent_id, facts("timed-001"), NOW)
    assert held.approval is not None
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=held.approval.id,
            approve=True,
            member_ref=member,
            via="cli_break_glass",
            now=NOW + timedelta(seconds=90),
        )
    assert _wait("approved") == (approved_before[0] + 1, approved_before[1] + 90)

    lapsing = reserve_now(db, setup.agent_id, facts("timed-002"), NOW)
    assert lapsing.approval is not None
    lifetime = (lapsing.approval.expires_at - lapsing.approval.created_at).total_seconds()
    with db.write() as session:
        expired = decisions.expire_lapsed(
            session, OPERATOR, now=lapsing.approval.expires_at + timedelta(hours=2)
        )
    # The approved one, never used, lapses too: it was timed when it was approved. The other
    # counts its whole lifetime, however late the expiry was written down.
    assert lapsing.approval.id in {approval.id for approval in expired}
    assert _wait("expired") == (expired_before[0] + 1, expired_before[1] + lifetime)
    assert _wait("approved") == (approved_before[0] + 1, approved_before[1] + 90)
