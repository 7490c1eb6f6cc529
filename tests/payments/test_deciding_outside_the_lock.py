"""A reservation reads and decides before its organisation's lock, and under the lock reads again
only what was written meanwhile, on PostgreSQL (on SQLite a writing transaction holds the one
write lock from its first statement, so nothing is written in between). Between the decision and
the lock, another transaction commits: another reservation that fills the cap (the spend is
summed again and the cap holds, with no policy read under the lock; a denial stands without
summing), a tighter policy or a disabled agent (decided afresh, refused), or nothing (the decision
stands, and the lock covers only the writes)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from server.kit import db as kit_db
from server.kit.db import Database
from server.payments import ledger
from server.policy.service import PolicyChanges
from tests.support.clocks import written
from tests.support.databases import migrated_database
from tests.support.ledger import CENT, PAYEE, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.tenants import AgentSetup, change_policy, make_agent, pin_payee

NOW = written(2026, 12, 2, 12, 0)
HOST = "api.example.com"


@pytest.fixture
def pg(tmp_path: Path) -> Iterator[Database]:
    with migrated_database("postgres", tmp_path) as database:
        yield database


def _agent(db: Database, *, daily_cap: str) -> AgentSetup:
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=[HOST], daily_cap=daily_cap)
    pin_payee(db, url=f"https://{HOST}/v1/search", pay_to=PAYEE)
    return setup


@contextmanager
def before_the_lock(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], object]) -> Iterator[list[str]]:
    """Run `meanwhile` (in a transaction of its own, committed) once the reservation has decided
    and before it takes its organisation's lock; yield the statements run under that lock."""
    real = kit_db.lock_org
    under_lock: list[str] = []
    engines: list[Any] = []
    first = threading.Lock()

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        under_lock.append(statement)

    def interfering_then_lock(session: Any, org_id: str) -> None:
        if first.acquire(blocking=False):  # the reservation under test; `meanwhile`'s own pass by
            worker = threading.Thread(target=meanwhile)
            worker.start()
            worker.join(30)
            assert not worker.is_alive()
            engines.append(session.get_bind())
            event.listen(engines[0], "before_cursor_execute", seen)
        real(session, org_id)

    monkeypatch.setattr(ledger, "lock_org", interfering_then_lock)
    try:
        yield under_lock
    finally:
        if engines:
            event.remove(engines[0], "before_cursor_execute", seen)


def _reads_policy(statements: list[str]) -> bool:
    return any("policy_versions" in s or "rule_versions" in s for s in statements)


def test_a_reservation_committed_meanwhile_is_summed_again_and_the_cap_holds(
    pg: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _agent(pg, daily_cap="0.10")
    six = 6 * CENT

    with before_the_lock(
        monkeypatch, lambda: reserve_now(pg, setup.agent_id, facts("other", amount=six), NOW)
    ) as under:
        late = reserve_now(pg, setup.agent_id, facts("late", amount=six), NOW)

    assert late.kind == "denied"  # 6 + 6 cents over a cap of 10
    assert late.decision is not None
    assert not _reads_policy(under)  # only payments were written meanwhile: no policy read again


def test_a_policy_tightened_meanwhile_is_decided_afresh(
    pg: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _agent(pg, daily_cap="10.00")
    tighten = lambda: change_policy(pg, setup.agent_id, PolicyChanges(daily_cap_usd=Decimal("0.005")))  # noqa: E731

    with before_the_lock(monkeypatch, tighten) as under:
        late = reserve_now(pg, setup.agent_id, facts("late", amount=CENT), NOW)

    assert late.kind == "denied"
    assert _reads_policy(under)


def test_with_nothing_written_meanwhile_the_decision_stands_and_the_lock_covers_the_writes(
    pg: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _agent(pg, daily_cap="10.00")

    with before_the_lock(monkeypatch, lambda: None) as under:
        reserved = reserve_now(pg, setup.agent_id, facts("alone", amount=CENT), NOW)

    assert reserved.kind == "authorized"
    assert not _reads_policy(under)
    assert not any(
        "payment_intents" in s and s.lstrip().upper().startswith("SELECT") and "sum(" in s.lower()
        for s in under
    )


def test_an_agent_disabled_meanwhile_pays_nothing(pg: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    from server.payments.errors import AgentDisabled
    from server.tenancy.service import get_agent, set_agent_disabled
    from tests.support.principals import OPERATOR

    setup = _agent(pg, daily_cap="10.00")

    def disable() -> None:
        with pg.write() as session:
            agent = get_agent(session, OPERATOR, setup.agent_id)
            set_agent_disabled(session, agent=agent, disabled=True, actor="test", now=NOW)

    with before_the_lock(monkeypatch, disable), pytest.raises(AgentDisabled):
        reserve_now(pg, setup.agent_id, facts("late", amount=CENT), NOW)


def test_a_denial_read_before_the_lock_stands_without_summing_again(
    pg: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = _agent(pg, daily_cap="0.10")
    assert reserve_now(pg, setup.agent_id, facts("first", amount=6 * CENT), NOW).kind == "authorized"

    meanwhile = lambda: reserve_now(pg, setup.agent_id, facts("small", amount=CENT), NOW)  # noqa: E731
    with before_the_lock(monkeypatch, meanwhile) as under:
        late = reserve_now(pg, setup.agent_id, facts("late", amount=6 * CENT), NOW)

    assert late.kind == "denied"
    assert not _reads_policy(under)
    assert not any("sum(" in statement.lower() for statement in under)
