"""Real databases for tests: a SQLite file, or a fresh PostgreSQL database created per use.

PostgreSQL is found at PAYWARDEN_TEST_POSTGRES_URL (default: postgres@127.0.0.1:5432/test, trust
auth). Each use gets its own database, dropped afterwards, so tests never see each other's rows.
Schemas are always built by the migrations, never by create_all().
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
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


def postgres_admin_url() -> str:
    return os.environ.get("PAYWARDEN_TEST_POSTGRES_URL", DEFAULT_ADMIN_URL)


def postgres_available() -> bool:
    try:
        with psycopg.connect(postgres_admin_url(), connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@contextmanager
def fresh_postgres() -> Iterator[str]:
    """Create an empty database and yield its SQLAlchemy URL; drop it afterwards."""
    admin = postgres_admin_url()
    if not postgres_available():
        require(POSTGRES_MISSING.format(url=admin))
    name = f"pw_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = admin.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_url(kind: str, directory: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'paywarden.db'}"
    else:
        with fresh_postgres() as url:
            yield url


@contextmanager
def migrated_database(kind: str, directory: Path) -> Iterator[Database]:
    with database_url(kind, directory) as url:
        db = Database(url, audit_key=TEST_AUDIT_KEY)
        upgrade(db)
        try:
            yield db
        finally:
            db.dispose()
