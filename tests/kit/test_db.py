"""SQLite's sync level: commits are synced at checkpoints only (WAL, synchronous=NORMAL: safe from a
crash of the process), except a durable write's, synced before it returns (synchronous=FULL)."""

from __future__ import annotations

from sqlalchemy import text

from server.kit.db import Database

NORMAL, FULL = 1, 2


def test_a_durable_write_is_synced_and_the_others_are_not(sqlite_db: Database) -> None:
    with sqlite_db.read() as session:
        assert session.execute(text("PRAGMA synchronous")).scalar() == NORMAL
    with sqlite_db.write() as session:
        assert session.execute(text("PRAGMA synchronous")).scalar() == NORMAL
    with sqlite_db.write(durable=True) as session:
        assert session.execute(text("PRAGMA synchronous")).scalar() == FULL
        assert session.execute(text("PRAGMA journal_mode")).scalar() == "wal"
