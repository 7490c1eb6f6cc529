"""Shared fixtures: the chain and browser harnesses, and the two databases integration tests run on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from server.kit.db import Database
from tests.support.databases import migrated_database
from tests.support.fixtures_browser import *  # noqa: F403 - fixtures: chromium, browser_context, page, authenticator, screenshots
from tests.support.fixtures_chain import *  # noqa: F403 - fixtures: anvil, test_usdc, seller, funded_wallet

DATABASES = ["sqlite", "postgres"]

# Hypothesis keeps what it learns (failing examples included) under .pytest_cache, not in a
# top-level folder of its own.
set_hypothesis_home_dir(Path(__file__).resolve().parents[1] / ".pytest_cache" / "hypothesis")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=DATABASES)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated, empty database: SQLite and PostgreSQL in turn."""
    with migrated_database(request.param, tmp_path) as database:
        yield database


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    with migrated_database("sqlite", tmp_path) as database:
        yield database
