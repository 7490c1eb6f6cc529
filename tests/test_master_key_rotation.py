"""Rotating the master key: every sealed value re-sealed under the new key in one transaction, the
database's check value replaced with them, the audit chain still verifying; a crash halfway leaves
the old key the database's and every value readable with it. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select
from typer.testing import CliRunner, Result

from server.approvals.notifications import seal_webhook
from server.audit.hash_chain import chain_key
from server.audit.service import first_broken_link
from server.cli import app
from server.kit.clock import SystemClock
from server.kit.crypto import MasterKey, SealError
from server.kit.db import Database
from server.kit.ids import new_id
from server.models import AuditEvent, MasterKeyCheck, Organization, PendingChange, SealedSecret, Wallet
from server.signers.cdp_credentials import CdpCredentials
from server.signers.key_material import unseal_cdp_credentials, unseal_wallet_key
from server.tenancy.service import find_agent, find_org, set_slack_webhook
from server.vocabulary import PendingChangeKind
from server.wallets.cdp import save_cdp_credentials
from server.wallets.master_key import MasterKeyMismatch, open_master_key
from server.wallets.rotation import ROTATED_EVENT, MasterKeyUnchanged, rotate_master_key
from server.wallets.sealed import SEALED_COLUMNS, pending_result_context, webhook_context
from server.wallets.service import import_local_key
from tests.support.cli import CliResult, run_cli
from tests.support.databases import database_url
from tests.support.paywarden import TEST_MASTER_KEY, settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent

OLD = MasterKey.parse(TEST_MASTER_KEY)
NEW = MasterKey(b"\x42" * 32)
WALLET_KEYS = (
    "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
)
RESULT = b"pw_at_the-secret-a-confirmed-change-made-once"


class Crash(RuntimeError):
    pass


@dataclass(frozen=True)
class Sealed:
    """What the database holds sealed, as the test put it there: (context, plaintext) by row."""

    wallets: dict[str, bytes]
    webhooks: dict[str, bytes]
    results: dict[str, bytes]
    org_ids: list[str]
    cdp: dict[str, bytes]

    @property
    def count(self) -> int:
        return len(self.wallets) + len(self.webhooks) + len(self.results) + len(self.cdp)


def populate(db: Database) -> Sealed:
    """Two organisations, each with an agent holding an imported key, its own Slack webhook and CDP
    credentials, and a confirmed change whose result waits to be shown: every kind of sealed value,
    under OLD, in a database that recorded OLD's check value (as every process's start does)."""
    start_with(db, OLD).engine.dispose()
    settings = settings_for(database_url=db.url, port=8402)
    clock = SystemClock()
    wallets: dict[str, bytes] = {}
    webhooks: dict[str, bytes] = {}
    results: dict[str, bytes] = {}
    org_ids: list[str] = []
    cdp: dict[str, bytes] = {}
    for index, key in enumerate(WALLET_KEYS):
        setup = make_agent(db, settings, allow_hosts=[], wallet_key=key)
        org_ids.append(setup.org_id)
        url = f"https://hooks.slack.com/services/T0/B{index}/secret{index}"
        with db.write() as session:
            org = find_org(session, OPERATOR, setup.org_id)
            set_slack_webhook(
                session,
                org=org,
                sealed=seal_webhook(OLD, org_id=org.id, url=url),
                key_id=OLD.key_id,
                masked="https://hooks.slack.com/…",
                actor="operator:test",
                now=clock.now(),
            )
            credentials = CdpCredentials(
                f"organizations/o{index}/apiKeys/k", f"api-secret-{index}", f"wallet-{index}"
            )
            save_cdp_credentials(
                session, master=OLD, org=org, credentials=credentials, actor="operator:test", now=clock.now()
            )
            wallet = session.exec(select(Wallet).where(Wallet.agent_id == setup.agent_id)).one()
            wallets[wallet.id] = bytes.fromhex(key[2:])
            webhooks[org.id] = url.encode()
            cdp[org.id] = credentials.encode()
    change_id = new_id("change")
    now = clock.now()
    with db.write() as session:
        session.add(
            PendingChange(
                id=change_id,
                org_id=org_ids[0],
                kind=PendingChangeKind.NEW_CREDENTIAL,
                asked_by="token:tok_test",
                subject_id="agent_test",
                change_json="{}",
                change_hash="0" * 64,
                created_at=now,
                expires_at=now + timedelta(minutes=10),
                result_sealed=OLD.seal(RESULT, context=pending_result_context(change_id)),
                result_key_id=OLD.key_id,
            )
        )
    results[change_id] = RESULT
    return Sealed(wallets, webhooks, results, org_ids, cdp)


def opened(db: Database, master: MasterKey) -> Sealed:
    """Every sealed value opened with `master` (SealError if one does not open)."""
    with db.read() as session:
        wallets = {
            row.id: unseal_wallet_key(master, wallet_id=row.id, sealed=row.sealed_secret)
            for row in session.exec(select(Wallet)).all()
            if row.sealed_secret is not None
        }
        webhooks = {
            row.id: master.open(row.slack_webhook_sealed, context=webhook_context(row.id))
            for row in session.exec(select(Organization)).all()
            if row.slack_webhook_sealed is not None
        }
        results = {
            row.id: master.open(row.result_sealed, context=pending_result_context(row.id))
            for row in session.exec(select(PendingChange)).all()
            if row.result_sealed is not None
        }
        cdp = {
            row.id: unseal_cdp_credentials(master, org_id=row.id, sealed=row.cdp_credentials_sealed)
            for row in session.exec(select(Organization)).all()
            if row.cdp_credentials_sealed is not None
        }
        org_ids = sorted(webhooks)
    return Sealed(wallets, webhooks, results, org_ids, cdp)


def key_ids(db: Database) -> set[str | None]:
    with db.read() as session:
        return (
            {row.sealed_key_id for row in session.exec(select(Wallet)).all() if row.sealed_secret}
            | {
                row.slack_webhook_key_id
                for row in session.exec(select(Organization)).all()
                if row.slack_webhook_sealed
            }
            | {row.result_key_id for row in session.exec(select(PendingChange)).all() if row.result_sealed}
            | {
                row.cdp_credentials_key_id
                for row in session.exec(select(Organization)).all()
                if row.cdp_credentials_sealed
            }
        )


def start_with(db: Database, master: MasterKey) -> Database:
    """A new process's database, opened with `master` as `paywarden serve` opens it."""
    process_db = Database(db.url)
    settings = settings_for(database_url=db.url, port=8402, extra={"PAYWARDEN_MASTER_KEY": master.encode()})
    open_master_key(process_db, settings, clock=SystemClock(), may_create=False)
    return process_db


def rotate(db: Database, *, crash_after: int | None = None) -> None:
    def crash(done: int) -> None:
        if crash_after is not None and done >= crash_after:
            raise Crash(f"crashed after {done} values")

    with db.write() as session:
        rotate_master_key(
            session, current=OLD, new=NEW, actor="cli:test", now=SystemClock().now(), after_each=crash
        )


def test_every_sealed_column_is_rotated() -> None:
    """A sealed column the rotation does not know would be lost at the next rotation."""
    from sqlalchemy import LargeBinary

    from server.models import metadata

    listed = {(str(column.model.__tablename__), column.sealed) for column in SEALED_COLUMNS}
    sealed_columns = {
        (table.name, column.name)
        for table in metadata.tables.values()
        for column in table.columns
        if isinstance(column.type, LargeBinary)
        and "sealed" in column.name
        and table.name != SealedSecret.__tablename__
    }
    assert sealed_columns == listed
    for column in SEALED_COLUMNS:
        assert hasattr(column.model, column.key_id)


def test_rotation_reseals_every_value_and_replaces_the_check_value(db: Database) -> None:
    before = populate(db)
    assert key_ids(db) == {OLD.key_id}
    with db.read() as session:
        events_before = len(session.exec(select(AuditEvent)).all())

    rotate(db)

    after = opened(db, NEW)
    assert after.wallets == before.wallets
    assert after.webhooks == before.webhooks
    assert after.results == before.results
    assert after.cdp == before.cdp
    assert len(after.cdp) == 2
    assert key_ids(db) == {NEW.key_id}
    with pytest.raises(SealError):
        opened(db, OLD)
    with db.read() as session:
        check = session.get(MasterKeyCheck, 1)
        assert check is not None
        assert check.check_value == NEW.check_value()
        chain_secret = session.get(SealedSecret, "audit-chain-key")
        assert chain_secret is not None
        assert chain_secret.key_id == NEW.key_id
        rotated = session.exec(select(AuditEvent).where(AuditEvent.type == ROTATED_EVENT)).all()
        assert sorted(event.org_id for event in rotated) == sorted(
            {row.id for row in session.exec(select(Organization)).all()}
        )
        assert all(event.data == {"keyId": NEW.key_id, "previousKeyId": OLD.key_id} for event in rotated)
        assert len(session.exec(select(AuditEvent)).all()) == events_before + len(rotated)

    # The old key is refused with the usual one line; the new one starts and keeps the chain's key.
    with pytest.raises(MasterKeyMismatch, match="does not match this database's master key"):
        start_with(db, OLD)
    process_db = start_with(db, NEW)
    assert process_db.audit_key == chain_key(OLD)
    try:
        with process_db.read() as session:
            for org_id in before.org_ids:
                assert first_broken_link(session, org_id) is None
    finally:
        process_db.engine.dispose()

    # A second rotation, from NEW to another key: the chain's key is carried again, not re-derived.
    third = MasterKey(b"\x43" * 32)
    with db.write() as session:
        rotate_master_key(session, current=NEW, new=third, actor="cli:test", now=SystemClock().now())
    assert opened(db, third).wallets == before.wallets
    process_db = start_with(db, third)
    assert process_db.audit_key == chain_key(OLD)
    process_db.engine.dispose()


def test_a_crash_halfway_leaves_the_old_key_valid_and_everything_readable(db: Database) -> None:
    before = populate(db)
    half = (before.count + 1) // 2  # the chain's key counts as one more value
    assert before.count >= 4

    with pytest.raises(Crash):
        rotate(db, crash_after=half)

    after = opened(db, OLD)
    assert (after.wallets, after.webhooks, after.results, after.cdp) == (
        before.wallets,
        before.webhooks,
        before.results,
        before.cdp,
    )
    assert key_ids(db) == {OLD.key_id}
    with db.read() as session:
        check = session.get(MasterKeyCheck, 1)
        assert check is not None
        assert check.check_value == OLD.check_value()
        assert session.exec(select(SealedSecret)).all() == []
        assert session.exec(select(AuditEvent).where(AuditEvent.type == ROTATED_EVENT)).all() == []
    with pytest.raises(MasterKeyMismatch):
        start_with(db, NEW)
    process_db = start_with(db, OLD)
    process_db.engine.dispose()

    # And the rotation can simply be run again.
    rotate(db)
    assert opened(db, NEW).wallets == before.wallets


def test_rotating_to_the_same_key_or_from_another_key_changes_nothing(db: Database) -> None:
    populate(db)
    with db.write() as session, pytest.raises(MasterKeyUnchanged):
        rotate_master_key(session, current=OLD, new=OLD, actor="cli:test", now=SystemClock().now())
    with db.write() as session, pytest.raises(MasterKeyMismatch):
        rotate_master_key(session, current=NEW, new=OLD, actor="cli:test", now=SystemClock().now())
    assert key_ids(db) == {OLD.key_id}
    opened(db, OLD)


def _import_with(db: Database, master: MasterKey, agent_id: str) -> None:
    with db.write() as session:
        import_local_key(
            session,
            master=master,
            agent=find_agent(session, OPERATOR, agent_id),
            private_key=bytes.fromhex(WALLET_KEYS[0][2:]),
            actor="cli:test",
            now=SystemClock().now(),
        )


def _webhook_with(db: Database, master: MasterKey, org_id: str) -> None:
    with db.write() as session:
        set_slack_webhook(
            session,
            org=find_org(session, OPERATOR, org_id),
            sealed=seal_webhook(master, org_id=org_id, url="https://hooks.slack.com/services/T0/B9/x"),
            key_id=master.key_id,
            masked="masked",
            actor="operator:test",
            now=SystemClock().now(),
        )


def test_a_process_still_holding_the_old_key_seals_nothing_after_the_rotation(db: Database) -> None:
    """A server that was not stopped keeps the old key in memory: what it would seal now, no one
    could open, so it is refused and nothing is written."""
    before = populate(db)
    rotate(db)
    agent = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=[])  # no wallet yet
    with pytest.raises(MasterKeyMismatch, match="it was rotated"):
        _import_with(db, OLD, agent.agent_id)
    with pytest.raises(MasterKeyMismatch, match="it was rotated"):
        _webhook_with(db, OLD, before.org_ids[1])
    assert opened(db, NEW).wallets == before.wallets
    assert opened(db, NEW).webhooks == before.webhooks
    assert key_ids(db) == {NEW.key_id}
    # The new key seals as before.
    _import_with(db, NEW, agent.agent_id)
    _webhook_with(db, NEW, before.org_ids[1])
    assert len(opened(db, NEW).wallets) == len(before.wallets) + 1
    assert key_ids(db) == {NEW.key_id}


def test_the_migration_names_the_key_of_the_values_sealed_before_it(db: Database) -> None:
    """Values sealed before key ids existed are given the id of the key the database recorded."""
    from alembic import command

    from server.kit.migrations import alembic_config

    before = populate(db)
    for direction, revision in (("downgrade", "20261204_0015"), ("upgrade", "head")):
        config = alembic_config()
        with db.engine.begin() as conn:
            config.attributes["connection"] = conn
            getattr(command, direction)(config, revision)
    assert key_ids(db) == {OLD.key_id}
    rotate(db)
    assert opened(db, NEW).results == before.results


# --- the command ------------------------------------------------------------------------------


def invoke(
    url: str, *args: str, master_key: str | None, stdin: str | None = None, env: dict[str, str] | None = None
) -> Result:
    """A command in this process, with standard input (run_cli has none)."""
    environ: dict[str, str | None] = {
        "PAYWARDEN_DATABASE_URL": url,
        "PAYWARDEN_MASTER_KEY": master_key,
        **(env or {}),
    }
    return CliRunner().invoke(app, list(args), env=environ, input=stdin, catch_exceptions=False)


def report_of(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    with database_url(request.param, tmp_path) as value:
        yield value


def _set_up(url: str, *, master_key: str | None) -> None:
    assert run_cli(url, "migrate", master_key=master_key).exit_code == 0
    assert run_cli(url, "admin", "org", "create", "acme", master_key=master_key).exit_code == 0
    agent = run_cli(
        url, "admin", "agent", "create", "--org", "acme", "--name", "bot", "--json", master_key=master_key
    )
    imported = run_cli(
        url,
        *("admin", "wallet", "import", agent.json()["agentId"], "--from-env", "WALLET_TO_IMPORT"),
        master_key=master_key,
        env={"WALLET_TO_IMPORT": WALLET_KEYS[0]},
    )
    assert imported.exit_code == 0, imported.stderr


def _refused(result: CliResult, naming: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, result.stderr
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ")
    assert naming in lines[0]
    assert "does not match this database's master key" in lines[0]


@pytest.mark.parametrize("source", ["--from-env", "--stdin"])
def test_the_command_takes_the_new_key_from_a_variable_or_stdin(url: str, source: str) -> None:
    _set_up(url, master_key=TEST_MASTER_KEY)
    args = ("admin", "master-key", "rotate", "--json")
    if source == "--from-env":
        done = invoke(
            url,
            *args,
            "--from-env",
            "NEW_MASTER_KEY",
            master_key=TEST_MASTER_KEY,
            env={"NEW_MASTER_KEY": NEW.encode()},
        )
    else:
        done = invoke(url, *args, "--stdin", master_key=TEST_MASTER_KEY, stdin=NEW.encode() + "\n")
    assert done.exit_code == 0, done.stderr
    report = report_of(done)
    assert report["keyId"] == NEW.key_id
    assert report["previousKeyId"] == OLD.key_id
    assert report["resealed"]["wallet keys"] == 1
    assert report["keyFile"] is None
    assert "set PAYWARDEN_MASTER_KEY" in done.stderr
    assert NEW.encode() not in done.stdout + done.stderr

    _refused(run_cli(url, "audit", "verify", master_key=TEST_MASTER_KEY), "PAYWARDEN_MASTER_KEY")
    verified = run_cli(url, "audit", "verify", master_key=NEW.encode())
    assert verified.exit_code == 0, verified.stderr


def test_generate_writes_the_new_key_to_the_key_file(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    directory.mkdir()
    url = f"sqlite:///{directory / 'paywarden.db'}"
    _set_up(url, master_key=None)
    key_file = directory / ".paywarden-master-key"
    old_text = key_file.read_text().strip()

    done = invoke(url, "admin", "master-key", "rotate", "--generate", "--json", master_key=None)
    assert done.exit_code == 0, done.stderr
    report = report_of(done)
    new_text = key_file.read_text().strip()
    assert new_text != old_text
    assert MasterKey.parse(new_text).key_id == report["keyId"]
    assert report["keyFile"] == str(key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert not (directory / ".paywarden-master-key.new").exists()
    assert new_text not in done.stdout + done.stderr

    verified = run_cli(url, "audit", "verify", master_key=None)
    assert verified.exit_code == 0, verified.stderr
    _refused(run_cli(url, "audit", "verify", master_key=old_text), "PAYWARDEN_MASTER_KEY")


def test_a_rotation_stopped_before_the_key_file_moved_says_where_the_new_key_is(tmp_path: Path) -> None:
    """The database committed to the new key, the machine stopped before the file was replaced."""
    directory = tmp_path / "data"
    directory.mkdir()
    url = f"sqlite:///{directory / 'paywarden.db'}"
    _set_up(url, master_key=None)
    key_file = directory / ".paywarden-master-key"
    pending = directory / ".paywarden-master-key.new"
    old_text = key_file.read_text()
    assert invoke(url, "admin", "master-key", "rotate", "--generate", master_key=None).exit_code == 0
    pending.write_text(key_file.read_text())
    pending.chmod(0o600)
    key_file.write_text(old_text)

    refused = run_cli(url, "audit", "verify", master_key=None)
    assert refused.exit_code == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"a rotation left the new key in {pending}" in lines[0]
    pending.replace(key_file)
    assert run_cli(url, "audit", "verify", master_key=None).exit_code == 0


def test_a_failed_rotation_leaves_the_key_file_and_every_value_as_they_were(tmp_path: Path) -> None:
    """A value that does not open with the current key (here, altered bytes) stops the rotation
    before anything changed: the key file is the old one and no new key is left beside it."""
    directory = tmp_path / "data"
    directory.mkdir()
    url = f"sqlite:///{directory / 'paywarden.db'}"
    _set_up(url, master_key=None)
    key_file = directory / ".paywarden-master-key"
    old_text = key_file.read_text()
    database = Database(url)
    try:
        with database.write() as session:
            wallet = session.exec(select(Wallet)).one()
            assert wallet.sealed_secret is not None
            wallet.sealed_secret = wallet.sealed_secret[:-1] + bytes([wallet.sealed_secret[-1] ^ 1])
            session.add(wallet)
    finally:
        database.engine.dispose()

    done = invoke(url, "admin", "master-key", "rotate", "--generate", master_key=None)
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines() == [
        "error: sealed_value_unreadable: A sealed value does not open with the master key in use: "
        "nothing was rotated."
    ]
    assert key_file.read_text() == old_text
    assert not (directory / ".paywarden-master-key.new").exists()
    assert run_cli(url, "audit", "verify", master_key=None).exit_code == 0


def test_generate_is_refused_when_the_key_is_a_variable(url: str) -> None:
    _set_up(url, master_key=TEST_MASTER_KEY)
    done = invoke(url, "admin", "master-key", "rotate", "--generate", master_key=TEST_MASTER_KEY)
    assert done.exit_code == 1
    assert "PAYWARDEN_MASTER_KEY is in use" in done.stderr
    assert run_cli(url, "audit", "verify", master_key=TEST_MASTER_KEY).exit_code == 0


@pytest.mark.parametrize(
    ("args", "env", "stdin", "says"),
    [
        ((), {}, None, "exactly one of --from-env NAME, --stdin or --generate"),
        (("--stdin", "--generate"), {}, None, "exactly one of"),
        (("--from-env", "NOT_SET_ANYWHERE"), {}, None, "the variable NOT_SET_ANYWHERE is not set"),
        (("--stdin",), {}, "", "no key on standard input"),
        (("--stdin",), {}, "0x" + "ab" * 32 + "\n", "the new master key is not one"),
        (("--from-env", "SAME"), {"SAME": TEST_MASTER_KEY}, None, "master_key_unchanged"),
    ],
)
def test_the_command_refuses_a_bad_new_key_and_changes_nothing(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], stdin: str | None, says: str
) -> None:
    url = f"sqlite:///{tmp_path / 'paywarden.db'}"
    _set_up(url, master_key=TEST_MASTER_KEY)
    done = invoke(
        url, "admin", "master-key", "rotate", *args, master_key=TEST_MASTER_KEY, env=env, stdin=stdin
    )
    assert done.exit_code == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert says in lines[0]
    assert run_cli(url, "audit", "verify", master_key=TEST_MASTER_KEY).exit_code == 0
