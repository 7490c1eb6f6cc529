"""Appending to an organisation's chain advances its head row, which is also the organisation's
lock: an event appended while another transaction holds that lock waits and chains after it,
appenders racing leave one unbroken chain, appending and locking in either order never wait for
each other, and a chain cut short by its table's owner is not silently continued."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import text

from server.audit.service import first_broken_link, record
from server.kit.clock import SystemClock
from server.kit.db import Database, lock_org
from server.models import AuditHead
from server.tenancy.service import create_org
from tests.support.audit import chain, drop_append_only_triggers, remove
from tests.support.databases import migrated_database
from tests.support.races import at_once

WAIT_S = 30


def _org(db: Database, name: str = "acme") -> str:
    with db.write() as session:
        return create_org(session, name=name, actor="test", now=SystemClock().now()).id


def _append(db: Database, org_id: str, n: int) -> int:
    with db.write() as session:
        return record(
            session, org_id=org_id, type="test.event", actor="t", data={"n": n}, now=SystemClock().now()
        ).seq


def test_an_event_waits_for_the_transaction_holding_the_organisations_lock_and_chains_after_it(
    tmp_path: Path,
) -> None:
    # On PostgreSQL (SQLite has one writer at a time whatever the code does): the head row is the
    # organisation's lock, so the chain's order is the order in which its writers commit.
    with migrated_database("postgres", tmp_path) as db:
        org_id = _org(db)
        holding, release = threading.Event(), threading.Event()

        def decide_slowly() -> None:
            with db.write() as session:
                lock_org(session, org_id)
                holding.set()
                assert release.wait(WAIT_S)
                record(
                    session, org_id=org_id, type="test.locked", actor="t", data={}, now=SystemClock().now()
                )

        locking = threading.Thread(target=decide_slowly)
        locking.start()
        try:
            assert holding.wait(WAIT_S)
            appending = threading.Thread(target=_append, args=(db, org_id, 1))
            appending.start()
            appending.join(1)
            waited = appending.is_alive()
        finally:
            release.set()
            locking.join(WAIT_S)
            appending.join(WAIT_S)

        assert waited
        with db.read() as session:
            assert [event.type for event in chain(session, org_id)] == [
                "org.created",
                "test.locked",
                "test.event",
            ]
            assert first_broken_link(session, org_id) is None


def test_appenders_racing_leave_one_chain_and_its_head(db: Database) -> None:
    org_id = _org(db)

    seqs = at_once(*[lambda n=n: _append(db, org_id, n) for n in range(8)])

    assert sorted(seqs) == list(range(2, 10)), seqs  # type: ignore[type-var]
    with db.read() as session:
        events = chain(session, org_id)
        head = session.get(AuditHead, org_id)
        assert first_broken_link(session, org_id) is None
    assert head is not None
    assert (head.seq, head.hash) == (events[-1].seq, events[-1].hash)


def test_appending_then_locking_and_locking_then_appending_at_once_both_finish(db: Database) -> None:
    # One lock per organisation: the two orders cannot wait for each other.
    org_id = _org(db)

    def append_then_lock() -> str:
        with db.write() as session:
            record(session, org_id=org_id, type="test.first", actor="t", data={}, now=SystemClock().now())
            lock_org(session, org_id)
            record(session, org_id=org_id, type="test.first", actor="t", data={}, now=SystemClock().now())
        return "appended first"

    def lock_then_append() -> str:
        with db.write() as session:
            lock_org(session, org_id)
            record(session, org_id=org_id, type="test.second", actor="t", data={}, now=SystemClock().now())
        return "locked first"

    outcomes = at_once(*[append_then_lock, lock_then_append] * 4)

    assert sorted(map(str, outcomes)) == ["appended first"] * 4 + ["locked first"] * 4
    with db.read() as session:
        assert len(chain(session, org_id)) == 1 + 12
        assert first_broken_link(session, org_id) is None


def test_a_chain_cut_short_is_not_continued_as_if_whole(db: Database) -> None:
    org_id = _org(db)
    for n in range(4):
        _append(db, org_id, n)
    with db.write() as session:
        drop_append_only_triggers(session)  # as the table's owner could
        remove(session, org_id, seq_at_least=4)

    assert _append(db, org_id, 99) == 6  # after the head, not after what is left

    with db.read() as session:
        broken = first_broken_link(session, org_id)
    assert broken is not None
    assert (broken.seq, broken.reason) == (6, "sequence_gap")


def test_an_organisation_with_events_but_no_head_gets_one_from_its_newest_event(db: Database) -> None:
    # As after the migration that keeps heads, for an organisation it did not see.
    org_id = _org(db)
    _append(db, org_id, 1)
    with db.write() as session:
        session.execute(text("DELETE FROM audit_heads WHERE org_id = :o"), {"o": org_id})

    assert _append(db, org_id, 2) == 3

    with db.read() as session:
        assert first_broken_link(session, org_id) is None


def test_an_event_rolled_back_with_its_savepoint_leaves_the_next_one_in_its_place(db: Database) -> None:
    # A transaction remembers the head it holds, so its next event reads nothing; an event undone
    # with its savepoint takes the head back with it, and the next event finds where it stands.
    org_id = _org(db)
    with db.write() as session:
        lock_org(session, org_id)
        record(session, org_id=org_id, type="test.kept", actor="t", data={}, now=SystemClock().now())
        savepoint = session.begin_nested()
        record(session, org_id=org_id, type="test.undone", actor="t", data={}, now=SystemClock().now())
        savepoint.rollback()
        after = record(session, org_id=org_id, type="test.after", actor="t", data={}, now=SystemClock().now())

    assert after.seq == 3
    with db.read() as session:
        assert [event.type for event in chain(session, org_id)] == ["org.created", "test.kept", "test.after"]
        assert first_broken_link(session, org_id) is None
        head = session.get(AuditHead, org_id)
    assert head is not None
    assert (head.seq, head.hash) == (3, after.hash)
