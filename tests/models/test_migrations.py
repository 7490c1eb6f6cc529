"""The migrations build exactly the schema the models describe, and step down and up again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from server.kit.db import Database
from server.kit.migrations import alembic_config, current_revision, head_revision, schema_is_current
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


def test_the_head_revision_is_the_one_alembic_finds() -> None:
    from alembic.script import ScriptDirectory

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_the_current_revision_is_the_one_alembic_reads(freshly_migrated_db: Database) -> None:
    def alembics() -> str | None:
        with freshly_migrated_db.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    assert current_revision(freshly_migrated_db) == alembics() == head_revision()
    _move(freshly_migrated_db, "downgrade", "-1")
    assert current_revision(freshly_migrated_db) == alembics() != head_revision()
    _move(freshly_migrated_db, "downgrade", "base")
    assert current_revision(freshly_migrated_db) is alembics() is None


def test_a_database_without_the_version_table_has_no_revision(tmp_path: Path) -> None:
    empty = Database(f"sqlite:///{tmp_path / 'empty.sqlite'}")
    assert current_revision(empty) is None
    assert not schema_is_current(empty)


def test_checking_the_schema_loads_no_alembic(freshly_migrated_db: Database) -> None:
    """What `paywarden serve` and every process it starts do before serving, and /readyz on each
    probe: alembic (a hundred modules, a sixth of a second) is for migrating, not for asking."""
    check = (
        "import sys\n"
        "from server.kit.db import Database\n"
        "from server.kit.migrations import schema_is_current\n"
        f"assert schema_is_current(Database({freshly_migrated_db.url!r}))\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('alembic', 'mako')))\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
