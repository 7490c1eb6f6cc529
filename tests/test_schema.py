"""The migrations build exactly the schema the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from server.kit.db import Database
from server.kit.migrations import current_revision, head_revision
from server.models import metadata


def test_migrations_match_the_models(db: Database) -> None:
    assert current_revision(db) == head_revision()
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []
