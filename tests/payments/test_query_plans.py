"""The ledger's hot reads use an index, on both databases: list_payments' query and the counted-spend
sum behind every decision and every get_budget, for each scope a rule can have.

The statements are the ones the repository sends (captured from the driver), explained with the
same parameters. On PostgreSQL sequential scans are switched off for the explanation, so a plan that
still reads payment_intents sequentially means no index can serve the query at all; on SQLite the
plan must search payment_intents through an index, not scan it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IntentRepository, SpendFilter
from server.policy.windows import window_start
from server.vocabulary import IntentStatus, RuleScope, RuleWindow
from tests.support.payment_rows import write_payments
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent, make_member, make_team

ROWS = 2_000
TABLE = "payment_intents"


@contextmanager
def captured(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """Every statement sent to the driver while inside, with its parameters."""
    statements: list[tuple[str, Any]] = []

    def record(_conn: Connection, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def plan(db: Database, statement: str, parameters: Any) -> list[str]:
    with db.read() as session:
        connection = session.connection()
        if db.is_sqlite:
            rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            return [str(row[-1]) for row in rows]
        connection.exec_driver_sql("SET LOCAL enable_seqscan = off")
        return [str(row[0]) for row in connection.exec_driver_sql("EXPLAIN " + statement, parameters).all()]


def assert_indexed(db: Database, statement: str, parameters: Any) -> None:
    lines = plan(db, statement, parameters)
    text = "\n".join(lines)
    if db.is_sqlite:
        scans = [line for line in lines if line.startswith(f"SCAN {TABLE}")]
        assert not scans, f"full scan of {TABLE}:\n{text}\n{statement}"
        assert any(line.startswith(f"SEARCH {TABLE} USING") for line in lines), text
    else:
        assert f"Seq Scan on {TABLE}" not in text, f"no index serves this query:\n{text}\n{statement}"
        assert "Index" in text, text
        assert "ix_payment_intents" in text, text


def statement_of(db: Database, call: Callable[[IntentRepository], object]) -> tuple[str, Any]:
    with captured(db) as statements, db.read() as session:
        call(IntentRepository(session))
    mine = [(sql, params) for sql, params in statements if TABLE in sql]
    assert len(mine) == 1, mine
    return mine[0]


@pytest.fixture
def ledger(db: Database) -> dict[str, str]:
    settings = settings_for(database_url=db.url, port=8402)
    first = make_agent(db, settings, allow_hosts=["api.example.com"])
    team = make_team(db, first.org_id)
    member = make_member(db, first.org_id)
    second = make_agent(
        db, settings, allow_hosts=["api.example.com"], org_id=first.org_id, team_id=team, name="b"
    )
    third = make_agent(
        db, settings, allow_hosts=["api.example.com"], org_id=first.org_id, member_id=member, name="c"
    )
    agents = [first.agent_id, second.agent_id, third.agent_id]
    write_payments(db, org_id=first.org_id, agents=agents, count=ROWS, now=SystemClock().now(), days=60)
    return {"org": first.org_id, "agent": first.agent_id, "team": team, "member": member}


WINDOWS = tuple(RuleWindow)
SPEND_CASES: list[tuple[RuleScope, str | None, str | None]] = [
    (RuleScope.AGENT, None, None),
    (RuleScope.ORG, None, None),
    (RuleScope.TEAM, None, None),
    (RuleScope.MEMBER, None, None),
    (RuleScope.AGENT, "api.example.com", None),
    (RuleScope.ORG, "*.example.com", "/v1"),
]


def _newest(intents: IntentRepository, *, agent_id: str, status: IntentStatus | None) -> object:
    return intents.newest(OPERATOR, agent_id=agent_id, limit=10, status=status)


def _spend(intents: IntentRepository, *, spend: SpendFilter, since: datetime) -> object:
    return intents.counted_spend(spend, since=since, never_sent=NEVER_SENT_FAILURES)


def _spends(intents: IntentRepository, *, spends: list[tuple[SpendFilter, datetime]]) -> object:
    return intents.counted_spends(spends, never_sent=NEVER_SENT_FAILURES)


@pytest.mark.parametrize(
    ("status", "index"),
    [
        (None, "ix_payment_intents_agent_created_id"),
        (IntentStatus.FAILED, "ix_payment_intents_agent_status_created"),
    ],
)
def test_a_page_of_list_payments_is_read_in_index_order(
    db: Database, ledger: dict[str, str], status: IntentStatus | None, index: str
) -> None:
    """The newest first, by (created_at, id), for one status or all: the index holds that order, so
    a page is the first rows of one index range, with nothing sorted and no other status walked."""
    sql, params = statement_of(db, partial(_newest, agent_id=ledger["agent"], status=status))
    lines = plan(db, sql, params)
    text = "\n".join(lines)
    assert index in text, text
    if db.is_sqlite:
        assert "TEMP B-TREE" not in text, text
    else:
        assert "Sort" not in text, text


def test_the_hot_reads_use_an_index(db: Database, ledger: dict[str, str]) -> None:
    now = SystemClock().now()
    cases: dict[str, Callable[[IntentRepository], object]] = {}
    for status in (None, IntentStatus.FAILED):
        cases[f"list_payments status={status}"] = partial(_newest, agent_id=ledger["agent"], status=status)
    keys = {
        RuleScope.AGENT: "agent",
        RuleScope.ORG: "org",
        RuleScope.TEAM: "team",
        RuleScope.MEMBER: "member",
    }
    for scope, host, path in SPEND_CASES:
        spend = SpendFilter(ledger["org"], scope, ledger[keys[scope]], host, path)
        for window in WINDOWS:
            since = window_start(window, now)
            cases[f"counted spend {scope} {window} host={host} path={path}"] = partial(
                _spend, spend=spend, since=since
            )
    velocity = SpendFilter(ledger["org"], RuleScope.AGENT, ledger["agent"])
    cases["counted spend, velocity window"] = partial(
        _spend, spend=velocity, since=now - timedelta(seconds=60)
    )
    every = [(velocity, now - timedelta(seconds=60))] + [
        (SpendFilter(ledger["org"], scope, ledger[keys[scope]], host, path), window_start(window, now))
        for scope, host, path in SPEND_CASES
        for window in WINDOWS
    ]
    cases["counted spends, every scope and window in one statement"] = partial(_spends, spends=every)

    failures = []
    for name, call in cases.items():
        sql, params = statement_of(db, call)
        try:
            assert_indexed(db, sql, params)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert failures == []

    # The check itself can fail: a query on a column no index starts with is caught.
    with pytest.raises(AssertionError):
        assert_indexed(
            db, f"SELECT count(*) FROM {TABLE} WHERE fingerprint = 'x'", () if db.is_sqlite else {}
        )
