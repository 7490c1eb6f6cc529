"""An approval covers exactly what a person saw: the payment (amount, payee, network, host and
resource) and the hold reasons it was created for. A retry that meets a hold the approval does not
cover pays nothing: it waits for a new approval, and the old one can never pay. On SQLite and
PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from server.approvals import service as approvals
from server.approvals.errors import ApprovalNotPending
from server.kit.db import Database
from server.models import Approval, PaymentIntent
from server.payments import decisions
from server.payments.errors import ApprovalMismatch
from server.payments.ledger import Reservation
from server.policy.rulebook import add_rule
from server.policy.rules import RuleTarget
from server.policy.service import PolicyChanges
from server.settings import Settings
from server.vocabulary import RuleScope
from tests.support.clocks import written
from tests.support.ledger import authorize_held_now, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import AgentSetup, change_policy, make_agent, make_member

NOW = written(2026, 12, 2, 12, 0)
LATER = NOW + timedelta(minutes=2)


@pytest.fixture
def settings(db: Database) -> Settings:
    return settings_for(database_url=db.url, port=8402)


def approve(db: Database, approval_id: str, member: str, now: datetime = NOW + timedelta(minutes=1)) -> None:
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=approval_id,
            approve=True,
            member_ref=member,
            via="cli_break_glass",
            now=now,
        )


def held_and_approved(db: Database, settings: Settings, key: str) -> tuple[AgentSetup, str, Reservation]:
    """A payment to a new payee (held: new_pay_to), approved by a person."""
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    member = make_member(db, setup.org_id, role="approver")
    held = reserve_now(db, setup.agent_id, facts(key), NOW)
    assert held.kind == "held"
    assert held.approval is not None
    assert held.approval.decision["holdReasons"] == ["new_pay_to"]
    approve(db, held.approval.id, member)
    return setup, member, held


def approval(db: Database, approval_id: str) -> Approval:
    with db.read() as session:
        row = session.get(Approval, approval_id)
        assert row is not None
        return row


def status_of(db: Database, intent_id: str) -> str:
    with db.read() as session:
        row = session.get(PaymentIntent, intent_id)
        assert row is not None
        return str(row.status)


def hold_rule(db: Database, setup: AgentSetup, path_prefix: str) -> str:
    with db.write() as session:
        return add_rule(
            session,
            target=RuleTarget(RuleScope.ORG, setup.org_id, setup.org_id),
            kind="hold",
            host=None,
            path_prefix=path_prefix,
            limit_usd=None,
            window=None,
            actor="test",
            now=NOW,
        ).id


def assert_superseded(db: Database, old: Approval, again: Reservation, reason: str) -> Approval:
    """The retry became a new approval for the same payment, naming `reason`; the old one is done."""
    assert again.kind == "held"
    assert again.approval is not None
    assert again.intent is not None
    fresh = again.approval
    assert fresh.id != old.id
    assert (fresh.status, fresh.reason, fresh.intent_id) == ("pending", reason, old.intent_id)
    assert reason in fresh.decision["holdReasons"]
    assert approval(db, old.id).status == "superseded"
    assert status_of(db, old.intent_id) == "created"  # nothing authorised, nothing counted
    with db.read() as session:
        assert approvals.for_intent(session, OPERATOR, old.intent_id) == fresh
    return fresh


def test_a_hold_rule_added_after_the_approval_needs_a_new_approval(db: Database, settings: Settings) -> None:
    setup, member, held = held_and_approved(db, settings, "rule-after")
    assert held.approval is not None
    assert held.intent is not None
    rule = hold_rule(db, setup, "/v1/")
    again = authorize_held_now(db, setup.agent_id, held.intent.id, facts("rule-after"), LATER)
    fresh = assert_superseded(db, held.approval, again, "rule")
    assert fresh.decision["rules"] == [rule]

    # The old approval can no longer pay, nor be decided again.
    with pytest.raises(ApprovalNotPending):
        approve(db, held.approval.id, member, now=LATER)
    assert authorize_held_now(db, setup.agent_id, held.intent.id, facts("rule-after"), LATER).kind == "held"

    # Once a person approves the new one, the retry pays, once.
    approve(db, fresh.id, member, now=LATER)
    done = authorize_held_now(db, setup.agent_id, held.intent.id, facts("rule-after"), LATER)
    assert done.kind == "authorized"
    assert done.intent is not None
    assert done.intent.decision["coveredHolds"] == ["rule", "new_pay_to"]
    assert approval(db, fresh.id).status == "consumed"


def test_instructions_that_first_appear_on_the_retry_need_a_new_approval(
    db: Database, settings: Settings
) -> None:
    setup, _, held = held_and_approved(db, settings, "words-later")
    assert held.approval is not None
    assert held.intent is not None
    retry = replace(facts("words-later"), instruction_like_description=True)
    again = authorize_held_now(db, setup.agent_id, held.intent.id, retry, LATER)
    assert_superseded(db, held.approval, again, "instruction_like_description")


def test_a_threshold_that_now_applies_needs_a_new_approval(db: Database, settings: Settings) -> None:
    setup, _, held = held_and_approved(db, settings, "threshold-later")
    assert held.approval is not None
    assert held.intent is not None
    change_policy(db, setup.agent_id, PolicyChanges(step_up_threshold_usd=Decimal("0.001")))
    again = authorize_held_now(db, setup.agent_id, held.intent.id, facts("threshold-later"), LATER)
    fresh = assert_superseded(db, held.approval, again, "threshold")
    assert fresh.threshold_atomic == 1_000


def test_another_hold_rule_than_the_one_approved_needs_a_new_approval(
    db: Database, settings: Settings
) -> None:
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    member = make_member(db, setup.org_id)
    first = hold_rule(db, setup, "/v1/")
    held = reserve_now(db, setup.agent_id, facts("two-rules"), NOW)
    assert held.approval is not None
    assert held.intent is not None
    assert (held.approval.reason, held.approval.decision["rules"]) == ("rule", [first])
    approve(db, held.approval.id, member)
    second = hold_rule(db, setup, "/v1/search")
    again = authorize_held_now(db, setup.agent_id, held.intent.id, facts("two-rules"), LATER)
    fresh = assert_superseded(db, held.approval, again, "rule")
    assert sorted(fresh.decision["rules"]) == sorted([first, second])


def test_every_reason_a_person_saw_is_covered(db: Database, settings: Settings) -> None:
    # Held for two reasons at once (a new payee and the threshold); both were seen, so it pays.
    setup = make_agent(db, settings, allow_hosts=["api.example.com"], step_up="0.001")
    member = make_member(db, setup.org_id)
    held = reserve_now(db, setup.agent_id, facts("both"), NOW)
    assert held.approval is not None
    assert held.intent is not None
    assert held.approval.reason == "new_pay_to"
    assert held.approval.decision["holdReasons"] == ["new_pay_to", "threshold"]
    approve(db, held.approval.id, member)
    done = authorize_held_now(db, setup.agent_id, held.intent.id, facts("both"), LATER)
    assert done.kind == "authorized"

    # A reason that went away is no new reason either.
    other = reserve_now(db, setup.agent_id, facts("fewer"), NOW)
    assert other.approval is not None
    assert other.intent is not None
    approve(db, other.approval.id, member)
    change_policy(db, setup.agent_id, PolicyChanges(step_up_threshold_usd=None))
    assert authorize_held_now(db, setup.agent_id, other.intent.id, facts("fewer"), LATER).kind == "authorized"


def test_an_approval_covers_the_resource_a_person_saw(db: Database, settings: Settings) -> None:
    setup, _, held = held_and_approved(db, settings, "resource")
    assert held.approval is not None
    assert held.intent is not None
    assert held.approval.resource == "https://api.example.com/v1/search"
    elsewhere = replace(facts("resource"), path="/v1/other", resource="https://api.example.com/v1/other")
    with pytest.raises(ApprovalMismatch):
        authorize_held_now(db, setup.agent_id, held.intent.id, elsewhere, LATER)
    assert approval(db, held.approval.id).status == "approved"
    assert (
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("resource"), LATER).kind == "authorized"
    )


def test_a_full_queue_leaves_the_retry_unpaid(db: Database, settings: Settings) -> None:
    setup, _, held = held_and_approved(db, settings, "queue-then")
    assert held.approval is not None
    assert held.intent is not None
    for n in range(5):
        assert reserve_now(db, setup.agent_id, facts(f"queue-{n:04d}"), NOW).kind == "held"
    hold_rule(db, setup, "/v1/")
    again = authorize_held_now(db, setup.agent_id, held.intent.id, facts("queue-then"), LATER)
    assert again.kind == "queue_full"
    assert status_of(db, held.intent.id) == "created"
    assert approval(db, held.approval.id).status == "approved"  # nothing replaced it, nothing paid
