"""The audit log: a hash chain per organisation that shows any edit, and no secrets in it."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlmodel import col

from server.audit.service import AuditDataError, first_broken_link, record
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent
from server.tenancy.service import create_org
from tests.support.audit import drop_append_only_triggers


def test_events_chain_and_an_edit_breaks_the_chain_at_that_event(db: Database) -> None:
    now = SystemClock().now()
    with db.write() as session:
        org = create_org(session, name="acme", actor="test", now=now)
        for index in range(4):
            record(session, org_id=org.id, type="test.event", actor="test", data={"n": index}, now=now)
    with db.read() as session:
        assert first_broken_link(session, org.id) is None
    with db.write() as session:
        drop_append_only_triggers(session)  # as the table's owner could
        session.execute(
            update(AuditEvent)
            .where(col(AuditEvent.org_id) == org.id, col(AuditEvent.seq) == 3)
            .values(data={"n": 99})
        )
    with db.read() as session:
        broken = first_broken_link(session, org.id)
        assert broken is not None
        assert broken.seq == 3
        assert broken.reason == "hash_mismatch"


def test_organisations_have_separate_chains(db: Database) -> None:
    now = SystemClock().now()
    with db.write() as session:
        a = create_org(session, name="a", actor="test", now=now)
        b = create_org(session, name="b", actor="test", now=now)
        event_a = record(session, org_id=a.id, type="x", actor="t", data={}, now=now)
        event_b = record(session, org_id=b.id, type="x", actor="t", data={}, now=now)
    assert event_a.seq == event_b.seq == 2  # after each org's own org.created


@pytest.mark.parametrize(
    "data",
    [
        {"token": "abc"},
        {"nested": {"signature": "0x00"}},
        {"note": "pw_at_" + "a" * 40},
        {"list": ["0x" + "ab" * 32]},
        {"Private-Key": "x"},
        {"body": "hello"},
    ],
)
def test_secrets_and_bodies_are_refused(db: Database, data: dict[str, object]) -> None:
    now = SystemClock().now()
    with db.write() as session:
        org = create_org(session, name="acme", actor="test", now=now)
        with pytest.raises(AuditDataError):
            record(session, org_id=org.id, type="x", actor="t", data=data, now=now)


def test_public_hashes_are_allowed(db: Database) -> None:
    now = SystemClock().now()
    with db.write() as session:
        org = create_org(session, name="acme", actor="test", now=now)
        record(
            session,
            org_id=org.id,
            type="x",
            actor="t",
            data={"txHash": "0x" + "ab" * 32, "nonce": "0x" + "cd" * 32},
            now=now,
        )
