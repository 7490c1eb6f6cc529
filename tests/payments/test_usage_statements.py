"""Every counted sum a decision or a budget needs comes from one statement: the agent's day and
velocity window and each limit rule's scope, window and conditions are columns of one query over the
organisation's intents, and each column equals the sum counted alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.payments.budget import budget
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.ledger import standing
from server.payments.repository import IntentRepository, SpendFilter
from server.payments.usage import rule_filter
from server.policy.rulebook import add_rule, rules_for_agent
from server.policy.windows import window_start
from server.tenancy.service import get_agent, rule_target
from server.vocabulary import RuleScope
from tests.support.payment_rows import write_payments
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member, make_team

TABLE = "payment_intents"


@contextmanager
def statements_on(db: Database, table: str) -> Iterator[list[str]]:
    """Every statement sent to the driver while inside that reads or writes `table`."""
    seen: list[str] = []

    def record(_conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if table in statement:
            seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


@pytest.fixture
def ledger(db: Database) -> dict[str, str]:
    """Three agents of one organisation (one in a team, one of a member) with a year of payments,
    and limit rules in every scope and window, some with host and path conditions."""
    settings = settings_for(database_url=db.url, port=8402)
    first = make_agent(db, settings, allow_hosts=["api.example.com"])
    team = make_team(db, first.org_id)
    member = make_member(db, first.org_id)
    teamed = make_agent(
        db, settings, allow_hosts=["api.example.com"], org_id=first.org_id, team_id=team, name="b"
    )
    membered = make_agent(
        db, settings, allow_hosts=["api.example.com"], org_id=first.org_id, member_id=member, name="c"
    )
    now = SystemClock().now()
    write_payments(
        db,
        org_id=first.org_id,
        agents=[first.agent_id, teamed.agent_id, membered.agent_id],
        count=600,
        now=now,
    )
    terms: list[tuple[RuleScope, str, str | None, str | None, str]] = [
        (RuleScope.AGENT, membered.agent_id, None, None, "day"),
        (RuleScope.TEAM, team, "api.example.com", None, "week"),
        (RuleScope.MEMBER, member, None, None, "day"),
        (RuleScope.ORG, first.org_id, "*.example.com", "/v1", "month"),
        (RuleScope.ORG, first.org_id, None, "/other", "week"),
    ]
    with db.write() as session:
        for scope, ref, host, path, window in terms:
            add_rule(
                session,
                target=rule_target(session, OPERATOR, scope, ref),
                kind="limit",
                host=host,
                path_prefix=path,
                limit_usd=Decimal("1000"),
                window=window,
                actor="test",
                now=now,
            )
    return {"org": first.org_id, "agent": membered.agent_id, "teamed": teamed.agent_id}


def test_each_sum_of_the_one_statement_is_the_sum_counted_alone(db: Database, ledger: dict[str, str]) -> None:
    now = SystemClock().now()
    with db.read() as session:
        spends: list[tuple[SpendFilter, datetime]] = []
        for agent_id in (ledger["agent"], ledger["teamed"]):
            agent = get_agent(session, OPERATOR, agent_id)
            own = SpendFilter(agent.org_id, RuleScope.AGENT, agent.id)
            spends += [(own, now - timedelta(days=1)), (own, now - timedelta(seconds=60))]
            for rule in rules_for_agent(session, agent, now=now):
                assert rule.window is not None
                spends.append((rule_filter(rule, agent), window_start(rule.window, now)))
        intents = IntentRepository(session)
        with statements_on(db, TABLE) as seen:
            together = intents.counted_spends(spends, never_sent=NEVER_SENT_FAILURES)
        assert len(seen) == 1
        alone = [
            intents.counted_spend(spend, since=since, never_sent=NEVER_SENT_FAILURES)
            for spend, since in spends
        ]
    assert together == alone
    assert any(amount > 0 for amount, _ in together)
    assert any(amount == 0 for amount, _ in together)


def test_a_budget_and_a_decisions_standing_count_with_one_statement(
    db: Database, ledger: dict[str, str]
) -> None:
    now = SystemClock().now()
    with db.read() as session, statements_on(db, TABLE) as seen:
        report = budget(session, OPERATOR, agent_id=ledger["agent"], now=now)
        assert len(seen) == 1, seen
        agent = get_agent(session, OPERATOR, ledger["agent"])
        seen.clear()
        judged = standing(session, agent=agent, now=now)
        assert len(seen) == 1, seen
    # The budget's member line comes from the same statement (the member has a rule of its own here).
    assert report.member is not None
    assert report.member.cap_atomic is not None
    assert judged.usage.spent_today_atomic == report.spent_today_atomic
    assert dict(judged.usage.rule_spent_atomic) == {
        use.rule.id: use.spent_atomic for use in report.rule_limits + report.scope_limits
    }
