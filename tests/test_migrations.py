"""Migrations: the same files build SQLite and PostgreSQL, match the models, and run both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from server.kit.db import Database
from server.kit.migrations import alembic_config, current_revision, head_revision, schema_is_current, upgrade
from server.models import metadata
from tests.support.databases import database_url


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_migrations_build_exactly_the_models(kind: str, tmp_path: Path) -> None:
    with database_url(kind, tmp_path) as url:
        db = Database(url)
        try:
            assert not schema_is_current(db)
            upgrade(db)
            assert current_revision(db) == head_revision()
            with db.engine.connect() as conn:
                context = MigrationContext.configure(conn, opts={"compare_type": True})
                assert compare_metadata(context, metadata) == []
        finally:
            db.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_downgrade_to_nothing_and_up_again(kind: str, tmp_path: Path) -> None:
    with database_url(kind, tmp_path) as url:
        db = Database(url)
        try:
            upgrade(db)
            config = alembic_config()
            with db.engine.begin() as conn:
                config.attributes["connection"] = conn
                command.downgrade(config, "base")
            assert current_revision(db) is None
            upgrade(db)
            assert schema_is_current(db)
        finally:
            db.dispose()
