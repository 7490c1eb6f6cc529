"""Waiting for a person: the wait reads the database, so a decision written by anyone wakes it
within one poll; with no decision it gives up at its limit. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from server.approvals.waiting import wait_for_decision
from server.kit.db import Database
from server.payments import decisions
from server.vocabulary import ApprovalStatus
from tests.support.clocks import ShiftedClock
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member

pytestmark = pytest.mark.anyio


def held(db: Database) -> tuple[str, str]:
    """A pending approval (a new payee) created now, and an approver."""
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
    reservation = reserve_now(db, setup.agent_id, facts("wait-key-1"), datetime.now(UTC))
    assert reservation.approval is not None
    return reservation.approval.id, make_member(db, setup.org_id, role="approver")


def decide(db: Database, approval_id: str, member: str, *, approve: bool) -> None:
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=approval_id,
            approve=approve,
            member_ref=member,
            via="cli_break_glass",
            now=datetime.now(UTC),
        )


@pytest.mark.parametrize("approve", [True, False])
async def test_a_decision_wakes_the_wait_within_one_poll(db: Database, approve: bool) -> None:
    approval_id, member = held(db)
    outcome: list[ApprovalStatus] = []

    async def wait() -> None:
        outcome.append(
            await wait_for_decision(
                db, OPERATOR, approval_id, clock=ShiftedClock(), timeout_s=20, interval_s=0.2
            )
        )

    started = anyio.current_time()
    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.sleep(0.3)
        await anyio.to_thread.run_sync(lambda: decide(db, approval_id, member, approve=approve))
    assert outcome == [ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED]
    assert anyio.current_time() - started < 3


async def test_no_decision_gives_up_at_the_limit(db: Database) -> None:
    approval_id, _member = held(db)
    started = anyio.current_time()
    status = await wait_for_decision(
        db, OPERATOR, approval_id, clock=ShiftedClock(), timeout_s=0.5, interval_s=0.2
    )
    assert status == ApprovalStatus.PENDING
    assert 0.4 < anyio.current_time() - started < 2


async def test_expiry_ends_the_wait(db: Database) -> None:
    approval_id, _member = held(db)
    clock = ShiftedClock()
    clock.advance(timedelta(hours=1).total_seconds())
    status = await wait_for_decision(db, OPERATOR, approval_id, clock=clock, timeout_s=5, interval_s=2.0)
    assert status == ApprovalStatus.EXPIRED
