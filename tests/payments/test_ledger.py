"""The ledger on real databases (SQLite and PostgreSQL): reservations, holds and approvals,
counted spend per scope and window, and the reconciler."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import anyio
import pytest
from sqlmodel import col, select

from server.approvals import service as approvals
from server.approvals.errors import ApprovalDenied, ApprovalExpired, Forbidden
from server.catalog.service import find_listed
from server.chain.service import ChainService
from server.kit.db import Database
from server.models import Agent, AuditEvent, PaymentIntent
from server.payments import decisions
from server.payments.errors import ApprovalMismatch, IllegalTransition
from server.payments.ledger import update_intent
from server.payments.settlement.reconciler import ExpireAuthorizations
from server.policy.rulebook import add_rule, rules_for_agent
from server.policy.rules import Rule
from server.policy.service import PolicyChanges
from server.settings import Settings
from server.tenancy.service import rule_target
from server.vocabulary import IntentStatus, RuleScope
from tests.support.clocks import frozen_clock, written
from tests.support.ledger import CENT, PAYEE, agent_of, authorize_held_now, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import (
    AgentSetup,
    change_policy,
    make_agent,
    make_member,
    make_team,
    pin_payee,
)

NOW = written(2026, 12, 2, 12, 0)  # a Wednesday
OTHER_PAYEE = "0x2222222222222222222222222222222222222222"


@pytest.fixture
def settings(db: Database) -> Settings:
    return settings_for(database_url=db.url, port=8402)


def agent(db: Database, settings: Settings, *, pin: bool = True, **kw: object) -> AgentSetup:
    setup = make_agent(db, settings, allow_hosts=["api.example.com"], **kw)  # type: ignore[arg-type]
    if pin:
        with db.read() as session:
            listed = find_listed(session, "api.example.com")
        if listed is None:
            pin_payee(db, url="https://api.example.com/v1/search", pay_to=PAYEE)
    return setup


def intent(db: Database, intent_id: str) -> PaymentIntent:
    with db.read() as session:
        row = session.get(PaymentIntent, intent_id)
        assert row is not None
        return row


def events(db: Database, org_id: str) -> list[str]:
    with db.read() as session:
        return [
            e.type
            for e in session.exec(
                select(AuditEvent).where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
            )
        ]


def test_an_allowed_payment_is_authorised_and_counts_at_once(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, daily_cap="0.02")
    first = reserve_now(db, setup.agent_id, facts("key-0001"), NOW)
    second = reserve_now(db, setup.agent_id, facts("key-0002"), NOW)
    third = reserve_now(db, setup.agent_id, facts("key-0003"), NOW)
    assert (first.kind, second.kind, third.kind) == ("authorized", "authorized", "denied")
    assert third.decision is not None
    assert third.decision.reasons == ("daily_cap_exceeded",)
    assert first.intent is not None
    row = intent(db, first.intent.id)
    assert row.status == "authorized"
    assert row.authorized_at == NOW
    assert row.valid_before > int(NOW.timestamp())
    assert row.decision["versions"]["policy"] == 2
    assert set(row.decision["versions"]["rules"]) == {r.id for r in rules_for_agent_now(db, setup.agent_id)}
    assert events(db, setup.org_id).count("payment.authorized") == 2
    assert events(db, setup.org_id)[-1] == "payment.denied"


def rules_for_agent_now(db: Database, agent_id: str) -> list[Rule]:
    with db.read() as session:
        return list(rules_for_agent(session, agent_of(db, agent_id), now=NOW))


def test_a_key_names_one_purchase(db: Database, settings: Settings) -> None:
    setup = agent(db, settings)
    first = reserve_now(db, setup.agent_id, facts("same-key-1"), NOW)
    again = reserve_now(db, setup.agent_id, facts("same-key-1"), NOW)
    assert again.kind == "existing"
    assert again.intent is not None
    assert first.intent is not None
    assert again.intent.id == first.intent.id


def test_a_failed_payment_counts_until_the_chain_proves_it_cannot_settle(
    db: Database, settings: Settings
) -> None:
    setup = agent(db, settings, daily_cap="0.01")
    paid = reserve_now(db, setup.agent_id, facts("failing-1"), NOW)
    assert paid.intent is not None
    with db.write() as session:
        update_intent(
            session,
            OPERATOR,
            intent_id=paid.intent.id,
            to=IntentStatus.SUBMITTED,
            now=NOW,
            event="payment.submitted",
        )
        update_intent(
            session,
            OPERATOR,
            intent_id=paid.intent.id,
            to=IntentStatus.FAILED,
            now=NOW,
            event="payment.failed",
            failure_code="payment_rejected_by_seller",
        )
    assert reserve_now(db, setup.agent_id, facts("next-0001"), NOW).kind == "denied"
    # This server's clock past validBefore proves nothing: the seller may still settle it.
    after = datetime.fromtimestamp(paid.intent.valid_before + 3600, UTC)
    assert reserve_now(db, setup.agent_id, facts("next-0002"), after).kind == "denied"
    # The chain's proof (recorded by the reconciler, tests/payments/test_chain_evidence.py) does.
    with db.write() as session:
        row = session.get(PaymentIntent, paid.intent.id)
        assert row is not None
        row.lapse_block, row.lapse_block_time = 1234, paid.intent.valid_before
        session.add(row)
    assert reserve_now(db, setup.agent_id, facts("next-0003"), after).kind == "authorized"


@pytest.mark.parametrize("failure", ["signing_failed", "seller_unreachable", "never_sent"])
def test_a_payment_whose_signature_never_left_stops_counting_at_once(
    db: Database, settings: Settings, failure: str
) -> None:
    setup = agent(db, settings, daily_cap="0.01")
    paid = reserve_now(db, setup.agent_id, facts("never-left-1"), NOW)
    assert paid.intent is not None
    to = IntentStatus.EXPIRED if failure == "never_sent" else IntentStatus.FAILED
    with db.write() as session:
        update_intent(
            session, OPERATOR, intent_id=paid.intent.id, to=to, now=NOW, event="x", failure_code=failure
        )
    assert reserve_now(db, setup.agent_id, facts("next-0001"), NOW).kind == "authorized"


def test_a_held_payment_waits_uncounted_with_its_approval(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, pin=False, daily_cap="0.01")
    held = reserve_now(db, setup.agent_id, facts("held-0001"), NOW)
    assert held.kind == "held"
    assert held.decision is not None
    assert held.decision.hold_reason == "new_pay_to"
    assert held.intent is not None
    assert held.approval is not None
    row = intent(db, held.intent.id)
    assert (row.status, row.authorized_at, row.valid_before) == ("created", None, 0)
    assert held.approval.status == "pending"
    assert held.approval.expires_at == NOW + timedelta(minutes=15)
    assert held.approval.idempotency_key == "held-0001"
    # Not counted: a second held payment still fits under the cap.
    assert reserve_now(db, setup.agent_id, facts("held-0002"), NOW).kind == "held"


def test_approval_queues_hold_at_5_per_agent_and_20_per_organisation(
    db: Database, settings: Settings
) -> None:
    first = agent(db, settings, pin=False)
    kinds = [reserve_now(db, first.agent_id, facts(f"queue-a-{i:02d}"), NOW).kind for i in range(6)]
    assert kinds == ["held"] * 5 + ["queue_full"]
    others = [agent(db, settings, pin=False, org_id=first.org_id, name=f"agent-{n}") for n in range(4)]
    for n, other in enumerate(others[:3]):
        assert [reserve_now(db, other.agent_id, facts(f"queue-{n}-{i:02d}"), NOW).kind for i in range(5)] == [
            "held"
        ] * 5
    assert reserve_now(db, others[3].agent_id, facts("queue-last-1"), NOW).kind == "queue_full"
    # Expired approvals no longer take a place.
    later = NOW + timedelta(minutes=16)
    assert reserve_now(db, others[3].agent_id, facts("queue-last-2"), later).kind == "held"
    assert "payment.denied" in events(db, first.org_id)


def _approve(
    db: Database, approval_id: str, member_id: str, *, approve: bool = True, now: datetime = NOW
) -> None:
    with db.write() as session:
        decisions.decide_break_glass(
            session,
            OPERATOR,
            approval_id=approval_id,
            approve=approve,
            member_ref=member_id,
            via="cli_break_glass",
            now=now,
        )


def test_an_approved_retry_decides_again_and_authorises_once(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, pin=False)
    member = make_member(db, setup.org_id, role="approver")
    held = reserve_now(db, setup.agent_id, facts("approve-me"), NOW)
    assert held.intent is not None
    assert held.approval is not None
    # Still pending: the retry is told so and nothing is authorised.
    assert authorize_held_now(db, setup.agent_id, held.intent.id, facts("approve-me"), NOW).kind == "held"
    _approve(db, held.approval.id, member, now=NOW + timedelta(minutes=1))
    later = NOW + timedelta(minutes=2)
    with pytest.raises(ApprovalMismatch):
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("approve-me", amount=2 * CENT), later)
    with pytest.raises(ApprovalMismatch):
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("approve-me", pay_to=OTHER_PAYEE), later)
    done = authorize_held_now(db, setup.agent_id, held.intent.id, facts("approve-me"), later)
    assert done.kind == "authorized"
    assert done.decision is not None
    assert done.decision.hold_reason == "new_pay_to"  # the hold the human covered
    row = intent(db, held.intent.id)
    assert (row.status, row.authorized_at, row.decision["approvalId"]) == (
        "authorized",
        later,
        held.approval.id,
    )
    with db.read() as session:
        approval = approvals.for_intent(session, OPERATOR, held.intent.id)
        assert approval is not None
        assert (approval.status, approval.consumed_at) == ("consumed", later)
    assert (
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("approve-me"), later).kind == "existing"
    )
    assert "approval.approved" in events(db, setup.org_id)


def test_an_approval_does_not_lift_a_rule_that_fails_on_retry(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, pin=False)
    member = make_member(db, setup.org_id, role="admin")
    held = reserve_now(db, setup.agent_id, facts("cap-later"), NOW)
    assert held.intent is not None
    assert held.approval is not None
    _approve(db, held.approval.id, member)
    change_policy(db, setup.agent_id, PolicyChanges(daily_cap_usd=Decimal("0.005")))
    denied = authorize_held_now(db, setup.agent_id, held.intent.id, facts("cap-later"), NOW)
    assert denied.kind == "denied"
    assert denied.decision is not None
    assert denied.decision.reasons == ("daily_cap_exceeded",)
    change_policy(db, setup.agent_id, PolicyChanges(daily_cap_usd=Decimal("1")))
    assert (
        authorize_held_now(db, setup.agent_id, held.intent.id, facts("cap-later"), NOW).kind == "authorized"
    )


def test_denied_and_lapsed_approvals_refuse_the_retry(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, pin=False)
    member = make_member(db, setup.org_id, role="owner")
    denied = reserve_now(db, setup.agent_id, facts("deny-0001"), NOW)
    lapsed = reserve_now(db, setup.agent_id, facts("lapse-0001"), NOW)
    unused = reserve_now(db, setup.agent_id, facts("unused-001"), NOW)
    assert denied.approval
    assert denied.intent
    assert lapsed.approval
    assert lapsed.intent
    assert unused.approval
    assert unused.intent
    _approve(db, denied.approval.id, member, approve=False)
    assert intent(db, denied.intent.id).status == "failed"
    with pytest.raises(ApprovalDenied):
        authorize_held_now(db, setup.agent_id, denied.intent.id, facts("deny-0001"), NOW)
    with pytest.raises(ApprovalExpired):
        authorize_held_now(
            db, setup.agent_id, lapsed.intent.id, facts("lapse-0001"), NOW + timedelta(minutes=15)
        )
    _approve(db, unused.approval.id, member)
    with pytest.raises(ApprovalExpired):  # approved, but not retried within 10 minutes
        authorize_held_now(
            db, setup.agent_id, unused.intent.id, facts("unused-001"), NOW + timedelta(minutes=10)
        )


def test_a_viewer_cannot_decide(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, pin=False)
    viewer = make_member(db, setup.org_id, role="viewer")
    held = reserve_now(db, setup.agent_id, facts("viewer-001"), NOW)
    assert held.approval is not None
    with pytest.raises(Forbidden):
        _approve(db, held.approval.id, viewer)


def test_a_payee_once_paid_by_the_organisation_is_not_new(db: Database, settings: Settings) -> None:
    first = agent(db, settings, pin=False)
    second = agent(db, settings, pin=False, org_id=first.org_id, name="second")
    member = make_member(db, first.org_id)
    held = reserve_now(db, first.agent_id, facts("first-pay"), NOW)
    assert held.approval
    assert held.intent
    _approve(db, held.approval.id, member)
    done = authorize_held_now(db, first.agent_id, held.intent.id, facts("first-pay"), NOW)
    assert done.intent is not None
    # Authorised is not yet paid: the payee becomes known once the payment was sent.
    assert reserve_now(db, second.agent_id, facts("second-1"), NOW).kind == "held"
    with db.write() as session:
        update_intent(
            session,
            OPERATOR,
            intent_id=done.intent.id,
            to=IntentStatus.SUBMITTED,
            now=NOW,
            event="payment.submitted",
        )
    assert reserve_now(db, second.agent_id, facts("second-2"), NOW).kind == "authorized"
    other_org = agent(db, settings, pin=False)
    assert reserve_now(db, other_org.agent_id, facts("elsewhere"), NOW).kind == "held"


def _limit(db: Database, scope: str, ref: str, usd: str, window: str = "day", **terms: str) -> str:
    with db.write() as session:
        return add_rule(
            session,
            target=rule_target(session, OPERATOR, RuleScope(scope), ref),
            kind="limit",
            host=terms.get("host"),
            path_prefix=terms.get("path"),
            limit_usd=Decimal(usd),
            window=window,
            actor="test",
            now=NOW,
        ).id


def test_rules_count_everything_in_their_scope(db: Database, settings: Settings) -> None:
    a = agent(db, settings, name="a")
    team = make_team(db, a.org_id)
    member = make_member(db, a.org_id)
    with db.write() as session:
        row = session.get(Agent, a.agent_id)
        assert row is not None
        row.team_id = team
        session.add(row)
    b = agent(db, settings, org_id=a.org_id, name="b", team_id=team, member_id=member)
    c = agent(db, settings, org_id=a.org_id, name="c", member_id=member)
    team_rule = _limit(db, "team", team, "0.02")
    _limit(db, "member", member, "0.03")  # the member's daily sub-cap over b and c
    org_rule = _limit(db, "org", a.org_id, "0.05", window="month")
    path_rule = _limit(db, "agent", c.agent_id, "0.01", path="/v2/")

    assert reserve_now(db, a.agent_id, facts("a-1"), NOW).kind == "authorized"
    assert reserve_now(db, b.agent_id, facts("b-1"), NOW).kind == "authorized"
    over_team = reserve_now(db, a.agent_id, facts("a-2"), NOW)
    assert over_team.decision is not None
    assert over_team.decision.reasons == ("rule_limit_exceeded",)
    assert over_team.decision.rules == (team_rule,)
    assert over_team.decision.rule_scopes == {team_rule: "team"}

    assert reserve_now(db, c.agent_id, facts("c-1"), NOW).kind == "authorized"
    assert reserve_now(db, c.agent_id, facts("c-2", path="/v2/x"), NOW).kind == "authorized"
    on_path = reserve_now(db, c.agent_id, facts("c-3", path="/v2/y"), NOW)
    assert on_path.decision is not None
    assert on_path.decision.rules == (path_rule,)
    over_member = reserve_now(db, c.agent_id, facts("c-4"), NOW)
    assert over_member.decision is not None
    assert over_member.decision.reasons == ("member_cap_exceeded",)

    # The organisation's month: 4 cents spent; tomorrow the day caps reset, the month does not.
    tomorrow = NOW + timedelta(days=1)
    assert reserve_now(db, a.agent_id, facts("a-3"), tomorrow).kind == "authorized"
    over_org = reserve_now(db, a.agent_id, facts("a-4"), tomorrow)
    assert over_org.decision is not None
    assert over_org.decision.rules == (org_rule,)
    next_month = written(2027, 1, 1, 0, 0, 1)
    assert reserve_now(db, a.agent_id, facts("a-5"), next_month).kind == "authorized"


def test_a_member_without_a_sub_cap_cannot_pay(db: Database, settings: Settings) -> None:
    first = agent(db, settings)
    member = make_member(db, first.org_id)
    mine = agent(db, settings, org_id=first.org_id, name="mine", member_id=member)
    result = reserve_now(db, mine.agent_id, facts("no-cap-01"), NOW)
    assert result.decision is not None
    assert result.decision.reasons == ("member_cap_exceeded",)


def test_weeks_run_monday_to_sunday(db: Database, settings: Settings) -> None:
    setup = agent(db, settings)
    _limit(db, "agent", setup.agent_id, "0.02", window="week")
    sunday = written(2026, 12, 6, 23, 59)
    monday = written(2026, 12, 7, 0, 0, 1)
    assert reserve_now(db, setup.agent_id, facts("wk-1"), NOW).kind == "authorized"
    assert reserve_now(db, setup.agent_id, facts("wk-2"), sunday).kind == "authorized"
    assert reserve_now(db, setup.agent_id, facts("wk-3"), sunday).kind == "denied"
    assert reserve_now(db, setup.agent_id, facts("wk-4"), monday).kind == "authorized"


def test_new_agents_get_a_weekly_rule_of_five_daily_caps_that_stays(db: Database, settings: Settings) -> None:
    setup = agent(db, settings, daily_cap="2.00")
    with db.read() as session:
        (weekly,) = rules_for_agent(session, agent_of(db, setup.agent_id), now=NOW)
    # Created with the initial 10.00 daily cap; the later change to 2.00 does not move it.
    assert (weekly.kind, weekly.window, weekly.limit_atomic, weekly.source) == (
        "limit",
        "week",
        50_000_000,
        "default",
    )


def test_the_reconciler_expires_what_can_no_longer_happen(db: Database, settings: Settings) -> None:
    setup = agent(db, settings)
    unsent = reserve_now(db, setup.agent_id, facts("unsent-01"), NOW)
    sent = reserve_now(db, setup.agent_id, facts("sent-0001"), NOW)
    assert unsent.intent
    assert sent.intent
    with db.write() as session:
        update_intent(
            session,
            OPERATOR,
            intent_id=sent.intent.id,
            to=IntentStatus.SUBMITTED,
            now=NOW,
            event="payment.submitted",
        )
    held_setup = agent(db, settings, pin=False)
    held = reserve_now(db, held_setup.agent_id, facts("held-late", pay_to=OTHER_PAYEE), NOW)
    assert held.intent
    assert held.approval

    clock = frozen_clock(NOW + timedelta(minutes=20))
    job = ExpireAuthorizations(db=db, chain=ChainService({}), clock=clock)
    handled = anyio.run(job.run_once)
    assert handled == 2
    assert intent(db, unsent.intent.id).status == "expired"
    assert intent(db, unsent.intent.id).failure_code == "never_sent"
    # Sent, and no RPC to prove it did not settle: it stays, and keeps counting.
    assert intent(db, sent.intent.id).status == "submitted"
    assert intent(db, held.intent.id).status == "expired"
    with db.read() as session:
        approval = approvals.for_intent(session, OPERATOR, held.intent.id)
        assert approval is not None
        assert approval.status == "expired"
    assert anyio.run(job.run_once) == 0


def test_settled_is_final_when_the_sellers_answer_comes_later(db: Database, settings: Settings) -> None:
    setup = agent(db, settings)
    paid = reserve_now(db, setup.agent_id, facts("settled-first"), NOW)
    assert paid.intent is not None
    with db.write() as session:
        update_intent(
            session,
            OPERATOR,
            intent_id=paid.intent.id,
            to=IntentStatus.SUBMITTED,
            now=NOW,
            event="payment.submitted",
        )
        # A replay found the transfer on-chain before the seller's answer was recorded...
        update_intent(
            session,
            OPERATOR,
            intent_id=paid.intent.id,
            to=IntentStatus.SETTLED,
            now=NOW,
            event="payment.settled",
        )
        # ...and the answer, recorded afterwards, does not move it back.
        update_intent(
            session,
            OPERATOR,
            intent_id=paid.intent.id,
            to=IntentStatus.SETTLEMENT_PENDING,
            now=NOW,
            event="payment.receipt",
            seller_status=200,
        )
    row = intent(db, paid.intent.id)
    assert (row.status, row.seller_status) == ("settled", 200)
    with db.write() as session, pytest.raises(IllegalTransition):
        update_intent(
            session, OPERATOR, intent_id=paid.intent.id, to=IntentStatus.AUTHORIZED, now=NOW, event="x"
        )
