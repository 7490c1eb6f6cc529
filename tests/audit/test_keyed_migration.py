"""Events written before the chain was keyed (plain SHA-256) still verify: the migration that keyed
the chain appends, to each organisation that has events, one keyed `audit.keyed` event naming the
last of them. From then on they are covered by that keyed event; a plain hash anywhere else, or
legacy events without their anchor, are named."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import text

from server.audit.hash_chain import ANCHOR_TYPE, GENESIS
from server.audit.service import first_broken_link, record
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.kit.migrations import alembic_config, current_revision, head_revision, upgrade
from server.models import Agent, AuditEvent
from server.vocabulary import WalletMode
from tests.support.audit import add_plain_event, chain, drop_append_only_triggers, edit, rehash, remove
from tests.support.cli import run_cli
from tests.support.clocks import written
from tests.support.paywarden import TEST_MASTER_KEY

BEFORE_KEYING = "20261130_0007"
THEN = written(2026, 11, 1, 9, 0)
NOW = written(2026, 12, 1, 12, 0)


def step_down(db: Database, revision: str) -> None:
    config = alembic_config()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def legacy_org(db: Database, name: str, events: int) -> str:
    """An organisation and its events as the code before keying wrote them."""
    org_id = f"org_{name}"
    with db.write() as session:
        # The columns the table had then: the model has grown since.
        session.execute(
            text(
                "INSERT INTO organizations (id, name, approval_ttl_seconds, created_at) "
                "VALUES (:id, :name, 900, :created_at)"
            ),
            {"id": org_id, "name": name, "created_at": THEN},
        )
        prev = GENESIS
        for seq in range(1, events + 1):
            event = AuditEvent(
                id=f"evt_{name}_{seq}",
                org_id=org_id,
                seq=seq,
                type="org.created" if seq == 1 else "test.event",
                actor="cli:ops",
                data={"n": seq},
                created_at=THEN,
                prev_hash=prev,
                hash="",
            )
            prev = add_plain_event(session, event).hash
    return org_id


def broken(db: Database, org_id: str) -> tuple[int, str] | None:
    with db.read() as session:
        found = first_broken_link(session, org_id)
    return None if found is None else (found.seq, found.reason)


def test_legacy_events_are_anchored_by_the_migration_and_still_verify(db: Database) -> None:
    step_down(db, BEFORE_KEYING)
    acme = legacy_org(db, "acme", 4)
    globex = legacy_org(db, "globex", 1)
    # Legacy events not yet anchored are not trusted.
    assert broken(db, acme) == (1, "not_keyed")

    upgrade(db)  # with the tests' audit key, as `paywarden migrate` passes the master key's
    assert current_revision(db) == head_revision()
    for org_id, legacy in ((acme, 4), (globex, 1)):
        with db.read() as session:
            events = chain(session, org_id)
        anchor = events[-1]
        assert (anchor.seq, anchor.type) == (legacy + 1, ANCHOR_TYPE)
        assert anchor.data == {"legacySeq": legacy, "legacyHash": events[-2].hash}
        assert broken(db, org_id) is None
    with db.write() as session:
        record(session, org_id=acme, type="test.after", actor="t", data={}, now=NOW)
    assert broken(db, acme) is None

    # Upgrading again (after a step down) anchors nothing twice.
    step_down(db, BEFORE_KEYING)
    upgrade(db)
    with db.read() as session:
        assert [event.type for event in chain(session, acme)].count(ANCHOR_TYPE) == 1


def test_a_rewritten_legacy_event_is_caught_by_its_anchor(db: Database) -> None:
    step_down(db, BEFORE_KEYING)
    acme = legacy_org(db, "acme", 4)
    upgrade(db)
    with db.write() as session:
        drop_append_only_triggers(session)
        edit(session, acme, 2, {"n": 99})
        rehash(session, acme, from_seq=2, to_seq=4)  # every legacy hash recomputed, links too
    assert broken(db, acme) == (5, "link_mismatch")


def test_legacy_events_without_their_anchor_are_named(db: Database) -> None:
    step_down(db, BEFORE_KEYING)
    acme = legacy_org(db, "acme", 4)
    upgrade(db)
    with db.write() as session:
        record(session, org_id=acme, type="test.after", actor="t", data={}, now=NOW)
        drop_append_only_triggers(session)
        remove(session, acme, seq_at_least=5)  # the anchor and everything keyed after it
        add_plain_event(
            session,
            AuditEvent(
                id="evt_forged",
                org_id=acme,
                seq=5,
                type="test.forged",
                actor="t",
                data={},
                created_at=NOW,
                prev_hash=chain(session, acme)[-1].hash,
                hash="",
            ),
        )
    assert broken(db, acme) == (1, "not_keyed")


def test_the_migration_refuses_to_anchor_without_the_master_key(db: Database) -> None:
    step_down(db, BEFORE_KEYING)
    legacy_org(db, "acme", 2)
    keyless = Database(db.url)
    try:
        with pytest.raises(RuntimeError, match="run `paywarden migrate`"):
            upgrade(keyless)
        assert current_revision(keyless) == BEFORE_KEYING
    finally:
        keyless.dispose()


def test_paywarden_migrate_upgrades_a_database_set_up_before_keys_were_checked(db: Database) -> None:
    """A database from before the key check and the keyed chain: `migrate` with another key than
    the one that sealed its wallet changes nothing; with the right one it records the key's check
    value and anchors the old events, and everything verifies."""
    step_down(db, "20261129_0003")
    acme = legacy_org(db, "acme", 3)
    sealed = MasterKey.parse(TEST_MASTER_KEY).seal(b"\x01" * 32, context="wallet:wal_legacy")
    with db.write() as session:
        session.add(Agent(id="agt_legacy", org_id=acme, name="bot", network="eip155:84532", created_at=THEN))
        session.flush()
        session.execute(  # the columns the table had then
            text(
                "INSERT INTO wallets (id, org_id, agent_id, mode, address, sealed_secret, created_at) "
                "VALUES ('wal_legacy', :org, 'agt_legacy', :mode, :address, :sealed, :created_at)"
            ),
            {
                "org": acme,
                "mode": str(WalletMode.LOCAL_KEY),
                "address": "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23",
                "sealed": sealed,
                "created_at": THEN,
            },
        )
    refused = run_cli(db.url, "migrate", master_key=MasterKey(b"\x08" * 32).encode())
    assert refused.exit_code == 2
    assert "PAYWARDEN_MASTER_KEY does not match this database's master key" in refused.stderr
    assert current_revision(db) == "20261129_0003"

    assert run_cli(db.url, "migrate", "--json").json()["to"] == head_revision()
    assert broken(db, acme) is None
    assert run_cli(db.url, "audit", "verify", "--json").json()["intact"] is True
    assert run_cli(db.url, "migrate", master_key=MasterKey(b"\x08" * 32).encode()).exit_code == 2
