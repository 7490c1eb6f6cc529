"""The migrations build exactly the schema the models describe, and step down and up again."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from server.kit.db import Database
from server.kit.migrations import alembic_config, current_revision, head_revision
from server.models import metadata
from server.models.search import include_name


def _diff(db: Database) -> list[object]:
    with db.engine.connect() as conn:
        return list(
            compare_metadata(
                MigrationContext.configure(conn, opts={"compare_type": True, "include_name": include_name}),
                metadata,
            )
        )


def _move(db: Database, direction: str, revision: str) -> None:
    config = alembic_config()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        getattr(command, direction)(config, revision)


def test_migrations_match_the_models(freshly_migrated_db: Database) -> None:
    assert current_revision(freshly_migrated_db) == head_revision()
    assert _diff(freshly_migrated_db) == []


def test_migrations_step_down_and_up_again(freshly_migrated_db: Database) -> None:
    _move(freshly_migrated_db, "downgrade", "base")
    assert current_revision(freshly_migrated_db) is None
    _move(freshly_migrated_db, "upgrade", "head")
    assert current_revision(freshly_migrated_db) == head_revision()
    assert _diff(freshly_migrated_db) == []
