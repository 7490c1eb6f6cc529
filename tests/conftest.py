"""Shared fixtures: the chain and browser harnesses, and the two databases integration tests run on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from server.kit.db import Database
from tests.support.databases import drop_all, migrated_database
from tests.support.fixtures_browser import *  # noqa: F403 - fixtures: chromium, browser_context, page, authenticator, screenshots
from tests.support.fixtures_chain import *  # noqa: F403 - fixtures: anvil, test_usdc, seller, funded_wallet

DATABASES = ["sqlite", "postgres"]

# Hypothesis keeps what it learns (failing examples included) under .pytest_cache, not in a
# top-level folder of its own.
set_hypothesis_home_dir(Path(__file__).resolve().parents[1] / ".pytest_cache" / "hypothesis")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # The migrated templates live for the session; test databases still being dropped are waited for.
    drop_all()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=DATABASES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated, empty database: SQLite and PostgreSQL in turn (a copy of the session's template)."""
    with migrated_database(request.param, tmp_path) as database:
        yield database


@pytest.fixture(params=DATABASES)
def freshly_migrated_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database the migrations just ran on, for tests whose subject is the migrations."""
    with migrated_database(request.param, tmp_path, migrate_here=True) as database:
        yield database


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    with migrated_database("sqlite", tmp_path) as database:
        yield database


@pytest.fixture(scope="module", params=DATABASES)
def module_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """One migrated database per module and kind, SQLite and PostgreSQL in turn: for tests on both
    databases that share one server per kind (docs/development.md, "Sharing a server")."""
    with migrated_database(request.param, tmp_path_factory.mktemp("module-db")) as database:
        yield database


@pytest.fixture(scope="module")
def module_sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Database]:
    """One migrated SQLite database for a whole module, for tests that share one server and keep
    apart by a fresh organisation and agent each (docs/development.md, "Sharing a server")."""
    with migrated_database("sqlite", tmp_path_factory.mktemp("module-db")) as database:
        yield database
