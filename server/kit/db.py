"""Database access: one engine per process, short units of work, and writes that serialise.

SQLite is embedded and the default; PostgreSQL is used by URL. Domain services take a Session and
never commit: the boundary (tool handler, CLI command, background job) opens a unit of work with
`Database.write()` or `Database.read()` and the unit commits or rolls back as a whole.

Writes that must not race (cap reservations, audit chains) are serialised per organisation:
PostgreSQL takes a row lock on the organisation (`lock_org`), SQLite starts every write
transaction with BEGIN IMMEDIATE so only one writer runs at a time across all processes.
The driver calls are synchronous; async callers run them in a worker thread with
`Database.reading(service, ...)` or `Database.writing(service, ...)`, which open the unit of work
and hand its session to the service they name (`Database.run` for work that opens its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session

from server.kit.metrics import DB_CONNECTIONS_IN_USE

P = ParamSpec("P")
T = TypeVar("T")

_SQLITE_BUSY_TIMEOUT_MS = 30_000
DEFAULT_POOL_SIZE = 10
# Per event loop, each Database's limit on threads doing its work at once (Database.run).
_LIMITERS: RunVar[dict[int, anyio.CapacityLimiter]] = RunVar("paywarden.db_limiters")
# Where a session carries the key that signs audit events (server/audit/service.py).
_AUDIT_KEY = "paywarden.audit_key"


def make_engine(url: str, *, pool_size: int = DEFAULT_POOL_SIZE, durable: bool = False) -> Engine:
    """The process's engine. On SQLite, `durable` makes an engine whose every commit is synced to
    disk (synchronous=FULL) for the few writes that must survive a power cut; PostgreSQL syncs
    every commit already (synchronous_commit)."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_on_connect_durable if durable else _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    else:
        # Up to twice pool_size connections per process: size it so that every process together
        # stays under the server's max_connections.
        engine = create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=pool_size)
    event.listen(engine, "checkout", _checked_out)
    event.listen(engine, "checkin", _checked_in)
    return engine


def _checked_out(_dbapi_connection: Any, _record: ConnectionPoolEntry, _proxy: Any) -> None:
    DB_CONNECTIONS_IN_USE.inc()


def _checked_in(_dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    DB_CONNECTIONS_IN_USE.dec()


def _sqlite_on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    # Take over transaction control from pysqlite so BEGIN IMMEDIATE is ours to emit.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    # WAL with NORMAL: a commit is written to the WAL but not synced, so it survives a crash of the
    # process, not a power cut; the writes that must (a signature about to leave) use FULL.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_on_connect_durable(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    _sqlite_on_connect(dbapi_connection, record)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    immediate = conn.get_execution_options().get("paywarden_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Database:
    def __init__(
        self, url: str, *, pool_size: int = DEFAULT_POOL_SIZE, audit_key: bytes | None = None
    ) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self.is_sqlite = url.startswith("sqlite")
        self._write_engine = self.engine.execution_options(paywarden_write=True)
        self._durable_pool: Engine | None = None
        self._durable_engine: Engine | None = None
        if self.is_sqlite:
            self._durable_pool = make_engine(url, pool_size=pool_size, durable=True)
            self._durable_engine = self._durable_pool.execution_options(paywarden_write=True)
        # Set once the master key is checked against the database; until then nothing can be
        # audited (server/audit/service.py refuses to write an event it cannot sign).
        self.audit_key = audit_key

    def _session(self, engine: Engine) -> Session:
        # Closing (not rolling back) keeps loaded objects usable after the unit of work ends.
        return Session(engine, expire_on_commit=False, info={_AUDIT_KEY: self.audit_key})

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._session(self.engine) as session:
            yield session

    @contextmanager
    def write(self, *, durable: bool = False) -> Iterator[Session]:
        """A unit of work that writes. `durable`: its commit is on disk when it returns, even on
        SQLite (where other commits may be lost to a power cut, never to a crash)."""
        engine = self._durable_engine if durable and self._durable_engine is not None else self._write_engine
        with self._session(engine) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run blocking database work off the event loop, in threads of its own: as many at once as
        the engine has connections (more would only wait for one), so database work never takes
        the threads the rest of the process needs (name resolution, file reads)."""
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._limiter())

    async def reading(
        self, service: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`service(session, *args, **kwargs)` in a unit of work that reads, off the event loop
        (as `run`): the call names the service it runs."""
        return await self.run(partial(self._read_with, service, *args, **kwargs))

    async def writing(
        self, service: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """`service(session, *args, **kwargs)` in a unit of work that writes and commits (or rolls
        back as a whole), off the event loop (as `run`)."""
        return await self.run(partial(self._write_with, service, *args, **kwargs))

    def _read_with(
        self, service: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        with self.read() as session:
            return service(session, *args, **kwargs)

    def _write_with(
        self, service: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        with self.write() as session:
            return service(session, *args, **kwargs)

    @property
    def engines(self) -> tuple[Engine, ...]:
        """Every engine this database sends statements through (SQLite's durable writes have one
        of their own): for whoever watches what is sent."""
        return (self.engine,) if self._durable_pool is None else (self.engine, self._durable_pool)

    def _limiter(self) -> anyio.CapacityLimiter:
        try:
            limiters = _LIMITERS.get()
        except LookupError:
            limiters = {}
            _LIMITERS.set(limiters)
        limiter = limiters.get(id(self))
        if limiter is None:
            limiter = limiters[id(self)] = anyio.CapacityLimiter(self.threads)
        return limiter

    @property
    def threads(self) -> int:
        """How many units of work may run at once: the engine's connections (its pool and the
        overflow it may open; SQLite's pool is SQLAlchemy's default, 5 and 10 more)."""
        size = getattr(self.engine.pool, "size", None)
        overflow = getattr(self.engine.pool, "_max_overflow", 0)
        if not callable(size):
            return DEFAULT_POOL_SIZE
        return max(1, int(size()) + max(int(overflow), 0))

    def dispose(self) -> None:
        self.engine.dispose()
        if self._durable_pool is not None:
            self._durable_pool.dispose()


def audit_key_of(session: Session) -> bytes | None:
    """The audit signing key of the unit of work `session` belongs to, if the process has one."""
    key = session.info.get(_AUDIT_KEY)
    return key if isinstance(key, bytes) else None


def locked_from_the_start(session: Session) -> bool:
    """Whether a writing transaction holds every organisation's lock from its first statement
    (SQLite's IMMEDIATE transaction: one writer at a time), so nothing another transaction writes
    can come between what it read and its `lock_org`."""
    return session.get_bind().dialect.name != "postgresql"


_HEADS_HELD = "paywarden.audit_heads_held"
_HEAD = text("SELECT seq, hash FROM audit_heads WHERE org_id = :org_id")
_LOCKED_HEAD = text("SELECT seq, hash FROM audit_heads WHERE org_id = :org_id FOR UPDATE")


def locked_head(session: Session, org_id: str) -> tuple[int, str] | None:
    """The organisation's audit head (seq, hash), its row locked until the transaction ends (on
    SQLite the IMMEDIATE transaction already holds the lock); None when it has no head yet."""
    statement = _HEAD if locked_from_the_start(session) else _LOCKED_HEAD
    row = session.execute(statement, {"org_id": org_id}).first()
    return None if row is None else (int(row[0]), str(row[1]))


def held_heads(session: Session) -> dict[str, tuple[int, str]]:
    """The audit heads the session's current transaction holds locked, as it last saw them
    (organisation id: seq, hash); empty in each new transaction."""
    transaction = session.get_transaction()
    kept = session.info.get(_HEADS_HELD)
    if kept is None or kept[0] is not transaction:
        kept = (transaction, {})
        session.info[_HEADS_HELD] = kept
    heads: dict[str, tuple[int, str]] = kept[1]
    return heads


def lock_org(session: Session, org_id: str) -> int | None:
    """Serialise writes for one organisation until the transaction ends; the seq of its newest
    audit event as the lock found it, where that is known (None: no head, or SQLite).

    The lock is the row of the organisation's audit head (server/audit/repository.py), the row
    that appending an event advances: one lock per organisation, so a transaction that appends and
    one that locks first can never wait for each other in opposite orders. An organisation without
    an event yet has no head: its own row is locked instead. On SQLite the IMMEDIATE transaction
    already holds the database's single write lock.
    """
    if locked_from_the_start(session):
        return None
    head = locked_head(session, org_id)
    if head is None:
        # NO KEY: rows that refer to the organisation (its first event's head) may still be written.
        session.execute(text("SELECT id FROM organizations WHERE id = :id FOR NO KEY UPDATE"), {"id": org_id})
        return None
    held_heads(session)[org_id] = head  # the next event appends without reading it
    return head[0]
