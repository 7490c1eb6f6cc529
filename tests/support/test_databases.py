"""Test databases: each is a copy of one migrated template, at the newest schema and apart from the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from server.kit.db import Database
from server.kit.migrations import current_revision, has_table, head_revision, upgrade
from tests.support.databases import migrated_database


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_copies_are_migrated_and_apart(kind: str, tmp_path: Path) -> None:
    with (
        migrated_database(kind, tmp_path / "one") as one,
        migrated_database(kind, tmp_path / "two") as two,
    ):
        assert current_revision(one) == current_revision(two) == head_revision()
        with one.engine.begin() as conn:
            conn.execute(text("CREATE TABLE probe (id INTEGER)"))
        assert has_table(one, "probe")
        assert not has_table(two, "probe")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_migrations_run_once_per_process(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[str] = []

    def counted(db: Database) -> None:
        runs.append(db.url)
        upgrade(db)

    monkeypatch.setattr("tests.support.databases.upgrade", counted)
    for index in range(3):
        with migrated_database(kind, tmp_path / str(index)) as db:
            assert current_revision(db) == head_revision()
    # The template may be made during this test (the first to need one), never once per database.
    assert len(runs) <= 1


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_migrate_here_runs_the_migrations_on_the_database_itself(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrated: list[str] = []

    def counted(db: Database) -> None:
        migrated.append(db.url)
        upgrade(db)

    monkeypatch.setattr("tests.support.databases.upgrade", counted)
    with migrated_database(kind, tmp_path, migrate_here=True) as db:
        assert migrated[-1] == db.url
        assert current_revision(db) == head_revision()
