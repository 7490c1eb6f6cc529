"""Real databases for tests: a SQLite file, or a PostgreSQL database of its own per use.

PostgreSQL is found at PAYWARDEN_TEST_POSTGRES_URL (default: postgres@127.0.0.1:5432/test, trust
auth). Each use gets its own database, dropped afterwards, so tests never see each other's rows.
Schemas are always built by the migrations, never by create_all().

Migrating takes longer than most tests, so a test process (each pytest-xdist worker is one)
migrates one template per kind the first time it needs one, and every migrated database after
that is a copy of it: SQLite's backup API copies the file, PostgreSQL's `CREATE DATABASE …
TEMPLATE` copies the database. A test that is about migrating asks for `migrate_here=True`.
Creating and dropping a PostgreSQL database each wait for the disk (CREATE DATABASE syncs the
copy), so both happen in a thread of their own while tests run: the next copy is made while the
current test runs, and drops go to a queue. `drop_all()` at the end of the session waits for them.
"""

from __future__ import annotations

import atexit
import os
import queue
import secrets
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager, suppress
from pathlib import Path

import psycopg

from server.audit.hash_chain import chain_key
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.kit.migrations import upgrade
from tests.support.paywarden import TEST_MASTER_KEY
from tests.support.plugin import require

# Databases for tests sign audit events as a server with the tests' master key would.
TEST_AUDIT_KEY = chain_key(MasterKey.parse(TEST_MASTER_KEY))
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
POSTGRES_MISSING = (
    "PostgreSQL not reachable at {url}: start it (pg_ctlcluster <version> main start) "
    "or point PAYWARDEN_TEST_POSTGRES_URL at a server where the user may CREATE DATABASE"
)
SQLITE_FILE = "paywarden.db"


def postgres_admin_url() -> str:
    return os.environ.get("PAYWARDEN_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)


def postgres_available() -> bool:
    try:
        with psycopg.connect(postgres_admin_url(), connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def _sqlalchemy_url(name: str) -> str:
    base = postgres_admin_url().rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}"


def _new_postgres_name() -> str:
    return f"pw_test_{secrets.token_hex(6)}"


def _create_postgres(name: str, *, template: str | None = None) -> None:
    admin = postgres_admin_url()
    if not postgres_available():
        require(POSTGRES_MISSING.format(url=admin))
    statement = f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(statement)


def _drop_postgres_now(name: str) -> None:
    with psycopg.connect(postgres_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _Dropper:
    """Drops PostgreSQL databases in a background thread, so no test waits for the last one's."""

    def __init__(self) -> None:
        self._names: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def drop(self, name: str) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="drop-test-databases", daemon=True)
                self._thread.start()
        self._names.put(name)

    def _run(self) -> None:
        while (name := self._names.get()) is not None:
            with suppress(psycopg.Error):  # the server went away: nothing is left to clean
                _drop_postgres_now(name)

    def wait(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._names.put(None)
            thread.join(timeout=120)


_dropper = _Dropper()


class _Templates:
    """One migrated database per kind, made on first use, copied for each test after that."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sqlite: Path | None = None
        self._postgres: str | None = None
        self._directory: Path | None = None

    def sqlite(self) -> Path:
        with self._lock:
            if self._sqlite is None:
                self._directory = Path(tempfile.mkdtemp(prefix="paywarden-template-"))
                path = self._directory / SQLITE_FILE
                _migrate(f"sqlite:///{path}")
                self._sqlite = path
            return self._sqlite

    def postgres(self) -> str:
        with self._lock:
            if self._postgres is None:
                name = f"pw_template_{secrets.token_hex(6)}"
                _create_postgres(name)
                try:
                    _migrate(_sqlalchemy_url(name))
                except BaseException:
                    _drop_postgres_now(name)
                    raise
                self._postgres = name
            return self._postgres

    def drop(self) -> None:
        with self._lock:
            if self._postgres is not None:
                _drop_postgres_now(self._postgres)
                self._postgres = None
            if self._directory is not None:
                shutil.rmtree(self._directory, ignore_errors=True)
                self._directory = self._sqlite = None


_templates = _Templates()


class _Spares:
    """Copies of the PostgreSQL template made one ahead, in a background thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._next: Future[str] | None = None

    def _copy(self, template: str) -> str:
        name = _new_postgres_name()
        _create_postgres(name, template=template)
        return name

    def take(self) -> str:
        template = _templates.postgres()
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="copy-test-databases")
            ready = self._next or self._executor.submit(self._copy, template)
            self._next = self._executor.submit(self._copy, template)
        return ready.result()

    def close(self) -> None:
        with self._lock:
            executor, spare = self._executor, self._next
            self._executor = self._next = None
        if executor is not None:
            executor.shutdown(wait=True)
        if spare is not None and spare.exception() is None:
            _drop_postgres_now(spare.result())


_spares = _Spares()


def _migrate(url: str) -> None:
    db = Database(url, audit_key=TEST_AUDIT_KEY)
    try:
        upgrade(db)
    finally:
        # A PostgreSQL template may have no connections while it is copied.
        db.dispose()


def drop_all() -> None:
    """Drop the spare copy and the templates, once the background drops are done: at the end of
    a test session."""
    with suppress(psycopg.Error):
        _spares.close()
    _dropper.wait()
    with suppress(psycopg.Error):
        _templates.drop()


atexit.register(drop_all)  # for a process that ends without pytest's session end


@contextmanager
def fresh_postgres() -> Iterator[str]:
    """Create an empty database and yield its SQLAlchemy URL; drop it afterwards."""
    name = _new_postgres_name()
    _create_postgres(name)
    try:
        yield _sqlalchemy_url(name)
    finally:
        _dropper.drop(name)


@contextmanager
def copied_postgres() -> Iterator[str]:
    """A copy of the migrated template; yields its SQLAlchemy URL, dropped afterwards."""
    if not postgres_available():
        require(POSTGRES_MISSING.format(url=postgres_admin_url()))
    name = _spares.take()
    try:
        yield _sqlalchemy_url(name)
    finally:
        _dropper.drop(name)


def copy_sqlite(target: Path) -> None:
    """Write a copy of the migrated SQLite template to `target` (the backup API reads its WAL too)."""
    with closing(sqlite3.connect(_templates.sqlite())) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)


@contextmanager
def database_url(kind: str, directory: Path) -> Iterator[str]:
    """An empty database (no tables): for tests that migrate, or run `paywarden migrate`."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / SQLITE_FILE}"
    else:
        with fresh_postgres() as url:
            yield url


@contextmanager
def migrated_url(kind: str, directory: Path) -> Iterator[str]:
    """A database at the newest schema, copied from the process's template."""
    if kind == "sqlite":
        directory.mkdir(parents=True, exist_ok=True)
        copy_sqlite(directory / SQLITE_FILE)
        yield f"sqlite:///{directory / SQLITE_FILE}"
    else:
        with copied_postgres() as url:
            yield url


@contextmanager
def migrated_database(kind: str, directory: Path, *, migrate_here: bool = False) -> Iterator[Database]:
    """A migrated, empty database. `migrate_here`: run the migrations on it now instead of copying
    the template, for tests whose subject is the migrations."""
    urls = database_url(kind, directory) if migrate_here else migrated_url(kind, directory)
    with urls as url:
        db = Database(url, audit_key=TEST_AUDIT_KEY)
        try:
            if migrate_here:
                upgrade(db)
            yield db
        finally:
            db.dispose()
