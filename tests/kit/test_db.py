"""SQLite's sync level: commits are synced at checkpoints only (WAL, synchronous=NORMAL: safe from a
crash of the process), except a durable write's, synced before it returns (synchronous=FULL). And
database work runs off the event loop in threads bounded by the engine's connections."""

from __future__ import annotations

import threading

import anyio
import pytest
from sqlalchemy import text
from sqlmodel import Session

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


def _inside(session: Session, label: str, *, twice: bool = False) -> tuple[str, int, bool]:
    """Which thread the service ran on, and whether its session can see what a write just kept."""
    value = session.execute(text("SELECT COUNT(*) FROM named_calls")).scalar_one()
    return (label * (2 if twice else 1), value, threading.current_thread() is threading.main_thread())


def _keep(session: Session, value: int) -> None:
    session.execute(text("INSERT INTO named_calls (value) VALUES (:value)"), {"value": value})


def _keep_then_fail(session: Session, value: int) -> None:
    _keep(session, value)
    raise RuntimeError("the service failed")


@pytest.mark.anyio
async def test_reading_and_writing_hand_a_unit_of_work_to_the_named_service(sqlite_db: Database) -> None:
    with sqlite_db.write() as session:
        session.execute(text("CREATE TABLE named_calls (value INTEGER)"))
    await sqlite_db.writing(_keep, 1)
    assert await sqlite_db.reading(_inside, "a", twice=True) == ("aa", 1, False)
    with pytest.raises(RuntimeError):
        await sqlite_db.writing(_keep_then_fail, 2)
    # The failed unit of work is rolled back as a whole.
    assert await sqlite_db.reading(_inside, "b") == ("b", 1, False)
