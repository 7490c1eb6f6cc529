"""The age /metrics reports for the audit log: when the newest event of any organisation was written."""

from __future__ import annotations

from datetime import timedelta

from server.audit.service import newest_event_at, record
from server.kit.db import Database
from server.tenancy.service import create_org
from tests.support.clocks import written

THEN = written(2026, 12, 3, 8, 0)


def test_the_newest_event_of_any_organisation_is_found(db: Database) -> None:
    with db.read() as session:
        assert newest_event_at(session) is None
    with db.write() as session:
        early = create_org(session, name="early", actor="test", now=THEN).id
        late = create_org(session, name="late", actor="test", now=THEN + timedelta(minutes=5)).id
        # The newest event is in the organisation made first: the newest of all heads, not the newest
        # organisation's.
        for org_id, minutes in ((late, 6), (early, 7), (early, 9)):
            at = THEN + timedelta(minutes=minutes)
            record(session, org_id=org_id, type="test.event", actor="test", data={}, now=at)
    with db.read() as session:
        newest = newest_event_at(session)
    assert newest == THEN + timedelta(minutes=9)
    assert newest.tzinfo is not None
