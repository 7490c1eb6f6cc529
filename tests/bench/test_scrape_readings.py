"""What a scrape of /metrics costs the database: the audit head's age and the payments by state,
read on PostgreSQL with a million audit events (200 organisations) and half a million payments.

The rows are written straight into a scratch database (triggers and foreign keys off), as a large
deployment would hold them; the figures are in docs/operations.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlmodel import Session

from server.audit.service import newest_event_at
from server.kit.db import Database
from server.payments.census import payments_by_state
from tests.bench.harness import quick, setting
from tests.support.databases import migrated_database

pytestmark = pytest.mark.postgres

ORGS = 200
STATES = "ARRAY['settled','settled','settled','failed','expired','authorized','submitted']"


def _fill(db: Database, *, events: int, payments: int) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("SET session_replication_role = replica"))
        conn.execute(
            text(
                "INSERT INTO organizations (id, name, created_at, approval_ttl_seconds) "
                f"SELECT 'org_' || g, 'org' || g, now(), 900 FROM generate_series(1, {ORGS}) g"
            )
        )
        conn.execute(
            text(
                "INSERT INTO audit_events (id, org_id, seq, type, actor, data, created_at, prev_hash, hash) "
                f"SELECT 'ev_' || g, 'org_' || (g % {ORGS} + 1), g / {ORGS} + 1, 't', 'a', '{{}}', "
                f"now() - (g || ' seconds')::interval, 'x', 'y' FROM generate_series(0, {events - 1}) g"
            )
        )
        conn.execute(
            text(
                "INSERT INTO payment_intents (id, org_id, agent_id, idempotency_key, fingerprint, status, "
                "method, host, resource, x402_version, network, asset, pay_to, amount_atomic, payer, nonce, "
                "valid_after, valid_before, policy_version, decision, wallet_mode, created_at, updated_at) "
                f"SELECT 'pi_' || g, 'org_' || (g % {ORGS} + 1), 'ag_' || (g % 1000), 'k' || g, 'f', "
                f"({STATES})[g % 7 + 1], 'GET', 'h', 'r', 2, 'n', 'a', 'p', 1, 'payer', 'n' || g, 0, 1, 1, "
                f"'{{}}', 'local', now(), now() FROM generate_series(0, {payments - 1}) g"
            )
        )
        conn.execute(text("ANALYZE"))


def _ms(session: Session, reading: Callable[[Session], Any], runs: int = 5) -> float:
    reading(session)
    started = time.perf_counter()
    for _ in range(runs):
        reading(session)
    return (time.perf_counter() - started) / runs * 1000


def _whole_log_max(session: Session) -> object:
    return session.execute(text("SELECT max(created_at) FROM audit_events")).one()


@pytest.mark.timeout(600)
def test_a_scrape_reads_the_audit_head_by_index_and_counts_payments(tmp_path: Path) -> None:
    events = setting("SCRAPE_EVENTS", 1_000_000, 20_000)
    payments = setting("SCRAPE_PAYMENTS", 500_000, 10_000)
    with migrated_database("postgres", tmp_path) as db:
        _fill(db, events=events, payments=payments)
        with db.read() as session:
            assert newest_event_at(session) is not None
            assert sum(payments_by_state(session).values()) == payments
            head_ms = _ms(session, newest_event_at)
            scan_ms = _ms(session, _whole_log_max)
            count_ms = _ms(session, payments_by_state)
    print(
        f"\n/metrics readings, {events} audit events in {ORGS} organisations, {payments} payments: "
        f"audit head age {head_ms:.1f} ms (max over the whole log: {scan_ms:.1f} ms), "
        f"payments by state {count_ms:.1f} ms"
    )
    if not quick():  # at a few thousand rows the two are alike
        assert head_ms < scan_ms  # the reason it reads each organisation's head
