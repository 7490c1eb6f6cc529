"""SQLite's sync level: commits are synced at checkpoints only (WAL, synchronous=NORMAL: safe from a
crash of the process), except a durable write's, synced before it returns (synchronous=FULL). And
database work runs off the event loop in threads bounded by the engine's connections."""

from __future__ import annotations

import threading

import anyio
import pytest
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


@pytest.mark.anyio
async def test_database_work_runs_in_threads_of_its_own_no_more_than_its_connections(
    sqlite_db: Database,
) -> None:
    assert sqlite_db.threads == 15  # SQLAlchemy's default pool for a file: 5, and 10 more
    lock = threading.Lock()
    running, most = 0, 0
    release = threading.Event()
    full = anyio.Event()

    def work() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            if running == sqlite_db.threads:
                anyio.from_thread.run_sync(full.set)
        release.wait(timeout=10)
        with lock:
            running -= 1

    async with anyio.create_task_group() as group:
        for _ in range(40):
            group.start_soon(sqlite_db.run, work)
        with anyio.fail_after(10):
            await full.wait()
        await anyio.sleep(0.1)  # had more been let in, they would be running by now
        assert most == sqlite_db.threads
        release.set()
    assert running == 0
