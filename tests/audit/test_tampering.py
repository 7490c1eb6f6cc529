"""Someone with write access to the database, but not the master key, cannot change the audit log
unnoticed: the database refuses UPDATE and DELETE, and with the triggers dropped (as the table's
owner could) every edit, deletion, reordering, truncation and rewrite with recomputed hashes is
named by verification. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, text, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.expression import Executable
from sqlmodel import col

from server.audit.hash_chain import plain_hash
from server.audit.service import Head, first_broken_link, heads, record
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import AuditEvent
from server.tenancy.service import create_org
from tests.support.audit import (
    body_of,
    chain,
    drop_append_only_triggers,
    edit,
    rehash,
    remove,
    swap,
    under,
)
from tests.support.clocks import written

NOW = written(2026, 12, 1, 12, 0)
EVENTS = 6  # org.created, then five events: seq 1 to 6


def a_chain(db: Database) -> str:
    with db.write() as session:
        org = create_org(session, name="acme", actor="test", now=NOW)
        for index in range(EVENTS - 1):
            record(session, org_id=org.id, type="test.event", actor="test", data={"n": index}, now=NOW)
    with db.read() as session:
        assert first_broken_link(session, org.id) is None
    return org.id


def verdict(db: Database, org_id: str, expected: Head | None = None) -> tuple[int, str] | None:
    with db.read() as session:
        found = first_broken_link(session, org_id, expected=expected)
    return None if found is None else (found.seq, found.reason)


def test_the_database_refuses_to_update_or_delete_audit_events(db: Database) -> None:
    org_id = a_chain(db)
    attempts: list[Executable] = [
        update(AuditEvent).where(col(AuditEvent.org_id) == org_id).values(data={"n": 99}),
        update(AuditEvent).where(col(AuditEvent.org_id) == org_id, col(AuditEvent.seq) == 6).values(seq=7),
        delete(AuditEvent).where(col(AuditEvent.org_id) == org_id, col(AuditEvent.seq) == 6),
        delete(AuditEvent),
    ]
    if db.engine.dialect.name == "postgresql":
        attempts.append(text("TRUNCATE audit_events CASCADE"))
    for statement in attempts:
        with pytest.raises(DBAPIError, match="append-only"), db.write() as session:
            session.execute(statement)
    with db.read() as session:
        assert len(chain(session, org_id)) == EVENTS
    assert verdict(db, org_id) is None


def test_an_edited_event_is_named(db: Database) -> None:
    org_id = a_chain(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        edit(session, org_id, 3, {"n": 99})
    assert verdict(db, org_id) == (3, "hash_mismatch")


def test_a_deleted_event_is_named(db: Database) -> None:
    org_id = a_chain(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        remove(session, org_id, seq_at_least=3, seq_at_most=3)
    assert verdict(db, org_id) == (4, "sequence_gap")


def test_reordered_events_are_named(db: Database) -> None:
    org_id = a_chain(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        swap(session, org_id, 3, 4)
    assert verdict(db, org_id) == (3, "link_mismatch")


def test_an_edit_with_every_later_hash_recomputed_in_plain_sha256_is_named(db: Database) -> None:
    """Anyone who reads the code can recompute SHA-256: such a rewrite is named as not keyed."""
    org_id = a_chain(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        edit(session, org_id, 3, {"n": 99})
        rehash(session, org_id, from_seq=3)
    assert verdict(db, org_id) == (3, "not_keyed")


def test_a_whole_chain_rewritten_in_plain_sha256_is_named(db: Database) -> None:
    org_id = a_chain(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        edit(session, org_id, 4, {"n": 99})
        rehash(session, org_id, from_seq=1)
    with db.read() as session:
        rewritten = chain(session, org_id)
    assert all(event.hash == plain_hash(body_of(event)) for event in rewritten)  # a consistent forgery
    assert verdict(db, org_id) == (1, "not_keyed")


def test_an_edit_with_hashes_recomputed_under_another_key_is_named(db: Database) -> None:
    org_id = a_chain(db)
    guessed = MasterKey(b"\x09" * 32).derive("paywarden/audit-chain/v1")
    with db.write() as session:
        drop_append_only_triggers(session)
        edit(session, org_id, 3, {"n": 99})
        rehash(session, org_id, from_seq=3, digest=under(guessed))
    assert verdict(db, org_id) == (3, "hash_mismatch")


def test_truncation_is_named_against_a_head_recorded_before(db: Database) -> None:
    org_id = a_chain(db)
    with db.read() as session:
        (head,) = heads(session)
    assert (head.org_id, head.seq) == (org_id, EVENTS)
    with db.write() as session:
        drop_append_only_triggers(session)
        remove(session, org_id, seq_at_least=5)
    # What is left is a shorter chain that checks out: only the recorded head can tell.
    assert verdict(db, org_id) is None
    with db.read() as session:
        found = first_broken_link(session, org_id, expected=head)
    assert found is not None
    assert (found.seq, found.reason, found.last_seq) == (EVENTS, "truncated", 4)


def test_a_head_that_is_not_in_the_chain_is_named(db: Database) -> None:
    org_id = a_chain(db)
    with db.read() as session:
        (head,) = heads(session)
    assert verdict(db, org_id, head) is None
    other = Head(org_id, head.seq, "ab" * 32)
    assert verdict(db, org_id, other) == (EVENTS, "head_mismatch")
    earlier = Head(org_id, 2, head.hash)
    assert verdict(db, org_id, earlier) == (2, "head_mismatch")
