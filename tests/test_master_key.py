"""The master key is never silently wrong: a database knows its key's check value, and every
command that uses the database (serve and migrate included) refuses another key with one line.
Without PAYWARDEN_MASTER_KEY the key file lives next to the SQLite database, whatever the working
directory, is created atomically, and never for a database that already holds sealed keys."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlmodel import select

from server.app import create_app
from server.kit.clock import SystemClock
from server.kit.crypto import MasterKey, read_master_key_file
from server.kit.db import Database
from server.kit.migrations import current_revision, upgrade
from server.models import MasterKeyCheck
from server.wallets.master_key import MasterKeyMismatch, open_master_key
from tests.support.chain import free_port
from tests.support.cli import Run, finish, paywarden, run_cli, start_paywarden
from tests.support.databases import database_url
from tests.support.paywarden import TEST_MASTER_KEY, settings_for

WALLET_KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
WALLET_IMPORT = ("admin", "wallet", "import", "--from-env", "WALLET_TO_IMPORT")
OTHER_KEY = MasterKey(b"\x08" * 32).encode()
KEY_FILE = ".paywarden-master-key"
SERVE_TIMEOUT_S = 60  # serve must refuse at once; a server that starts would run until this


def sqlite_url(directory: Path) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'paywarden.db'}"


def set_up(url: str, *, master_key: str | None) -> str:
    """A migrated database with an organisation, an agent and an imported wallet; the agent id."""
    assert run_cli(url, "migrate", master_key=master_key).exit_code == 0
    assert run_cli(url, "admin", "org", "create", "acme", master_key=master_key).exit_code == 0
    agent = run_cli(
        url, "admin", "agent", "create", "--org", "acme", "--name", "bot", "--json", master_key=master_key
    ).json()
    imported = run_cli(
        url, *WALLET_IMPORT, agent["agentId"], master_key=master_key, env={"WALLET_TO_IMPORT": WALLET_KEY}
    )
    assert imported.exit_code == 0, imported.stderr
    return str(agent["agentId"])


def every_command(url: str, cwd: Path, agent_id: str, *, master_key: str | None) -> dict[str, Run]:
    """serve, migrate and a wallet command as an operator types them (real processes, started
    together: each must refuse at once), and ordinary commands in this process."""
    commands = {
        "serve": ("serve", "--port", str(free_port())),
        "migrate": ("migrate",),
        "wallet import": (*WALLET_IMPORT, agent_id),
    }
    env = {"WALLET_TO_IMPORT": WALLET_KEY}
    started = {
        name: start_paywarden(*args, cwd=cwd, database_url=url, master_key=master_key, env=env)
        for name, args in commands.items()
    }
    runs = {name: finish(process, timeout=SERVE_TIMEOUT_S) for name, process in started.items()}
    for args in (
        ("admin", "org", "create", "other"),
        ("audit", "verify"),
        ("admin", "rule", "list", "--org", "acme"),
    ):
        result = run_cli(url, *args, master_key=master_key)
        runs[" ".join(args)] = Run(result.exit_code, result.stdout, result.stderr)
    return runs


def assert_refused(runs: dict[str, Run], naming: str) -> None:
    for name, run in runs.items():
        assert run.code == 2, (name, run.code, run.stderr)
        assert run.stdout == "", name
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, (name, run.stderr)
        assert lines[0].startswith("error: "), (name, run.stderr)
        assert naming in lines[0], (name, run.stderr)
        assert "does not match this database's master key" in lines[0] or "does not exist" in lines[0]
        assert "Traceback" not in run.stderr


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    with database_url(request.param, tmp_path) as value:
        yield value


def test_a_wrong_master_key_variable_is_refused_by_every_command(tmp_path: Path, url: str) -> None:
    agent_id = set_up(url, master_key=TEST_MASTER_KEY)
    revision = _revision(url)
    runs = every_command(url, tmp_path, agent_id, master_key=OTHER_KEY)
    assert_refused(runs, "PAYWARDEN_MASTER_KEY")
    assert _revision(url) == revision
    # The right key still works, and nothing the refused commands tried was written.
    assert run_cli(url, "audit", "verify").exit_code == 0
    assert run_cli(url, "admin", "org", "create", "other").exit_code == 0


def test_the_key_file_lives_next_to_the_database_whatever_the_working_directory(tmp_path: Path) -> None:
    data, first, second = tmp_path / "data", tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    url = sqlite_url(data)
    assert paywarden("migrate", cwd=first, database_url=url, master_key=None).code == 0
    key_file = data / KEY_FILE
    assert key_file.is_file()
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert not (first / KEY_FILE).exists()
    # Another working directory: the same key, found next to the same database.
    created = paywarden("admin", "org", "create", "acme", cwd=second, database_url=url, master_key=None)
    assert created.code == 0, created.stderr
    assert paywarden("audit", "verify", cwd=second, database_url=url, master_key=None).code == 0
    assert not (second / KEY_FILE).exists()
    assert _stored_check(url) == read_master_key_file(key_file).check_value()


def test_another_key_file_is_refused_by_every_command(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "data")
    agent_id = set_up(url, master_key=None)
    key_file = tmp_path / "data" / KEY_FILE
    key_file.write_text(OTHER_KEY + "\n")
    runs = every_command(url, tmp_path, agent_id, master_key=None)
    assert_refused(runs, str(key_file))


def test_no_key_file_is_created_for_a_database_with_sealed_keys(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "data")
    agent_id = set_up(url, master_key=None)
    key_file = tmp_path / "data" / KEY_FILE
    key_file.unlink()
    runs = every_command(url, tmp_path, agent_id, master_key=None)
    assert_refused(runs, str(key_file))
    assert not key_file.exists()


def test_a_database_set_up_with_the_variable_creates_no_key_file_without_it(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path / "data")
    agent_id = set_up(url, master_key=TEST_MASTER_KEY)
    runs = every_command(url, tmp_path, agent_id, master_key=None)
    assert_refused(runs, KEY_FILE)
    assert not (tmp_path / "data" / KEY_FILE).exists()


def test_postgres_needs_the_master_key_variable(tmp_path: Path) -> None:
    with database_url("postgres", tmp_path) as url:
        run = paywarden("migrate", cwd=tmp_path, database_url=url, master_key=None)
    assert run.code == 2
    assert run.stderr.strip().count("\n") == 0
    assert "PAYWARDEN_MASTER_KEY is required with PostgreSQL" in run.stderr
    assert not (tmp_path / KEY_FILE).exists()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_concurrent_first_starts_agree_on_one_key(tmp_path: Path, kind: str) -> None:
    """Several migrations start at once on a database no key was ever checked against: one key
    wins, every process uses it, and its check value is recorded once."""
    count = 4
    master_key = None if kind == "sqlite" else TEST_MASTER_KEY
    (tmp_path / "data").mkdir()
    with database_url(kind, tmp_path / "data") as url:
        db = Database(url)
        try:
            upgrade(db)
        finally:
            db.dispose()
        processes = []
        for index in range(count):
            cwd = tmp_path / f"cwd-{index}"
            cwd.mkdir()
            processes.append(
                # Only `migrate` and `demo` may make the key file (another command says to migrate).
                start_paywarden("migrate", cwd=cwd, database_url=url, master_key=master_key)
            )
        runs = [finish(process) for process in processes]
        assert [run.code for run in runs] == [0] * count, [run.stderr for run in runs]
        for index in range(count):
            assert not (tmp_path / f"cwd-{index}" / KEY_FILE).exists()
        if master_key is None:
            key = read_master_key_file(tmp_path / "data" / KEY_FILE)
        else:
            key = MasterKey.parse(master_key)
        assert _stored_check(url) == key.check_value()
        verified = run_cli(url, "audit", "verify", master_key=master_key)
        assert verified.exit_code == 0, verified.stderr


def _revision(url: str) -> str | None:
    db = Database(url)
    try:
        return current_revision(db)
    finally:
        db.dispose()


def _stored_check(url: str) -> str:
    db = Database(url)
    try:
        with db.read() as session:
            rows = list(session.exec(select(MasterKeyCheck)))
    finally:
        db.dispose()
    assert len(rows) == 1
    return rows[0].check_value


@pytest.mark.anyio
async def test_a_server_started_with_another_key_does_not_start(db: Database) -> None:
    """The app itself (as uvicorn --factory or a worker runs it) checks the key before serving."""
    settings = settings_for(database_url=db.url, port=8402)
    open_master_key(db, settings, clock=SystemClock())  # the database now knows its key
    other = settings_for(database_url=db.url, port=8402, extra={"PAYWARDEN_MASTER_KEY": OTHER_KEY})
    refused = create_app(other)
    with pytest.raises(MasterKeyMismatch, match="PAYWARDEN_MASTER_KEY does not match"):
        async with refused.router.lifespan_context(refused):
            pass
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        pass  # its own key serves


def test_a_command_other_than_migrate_makes_no_key_file(tmp_path: Path) -> None:
    """A migrated database without its key file: `admin org create` says how to go on, and makes
    neither a key nor an organisation."""
    url = f"sqlite:///{tmp_path / 'paywarden.db'}"
    db = Database(url)
    try:
        upgrade(db)
    finally:
        db.dispose()
    run = paywarden("admin", "org", "create", "acme", cwd=tmp_path, database_url=url, master_key=None)
    assert run.code == 2
    assert run.stderr.strip().count("\n") == 0
    assert "does not exist" in run.stderr
    assert "paywarden migrate" in run.stderr
    assert not (tmp_path / KEY_FILE).exists()
