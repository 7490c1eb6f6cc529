"""The base of every repository: the only place queries are written.

Each domain has one `repository.py` holding all of its queries, built on these bases. A
`TenantRepository` is for rows that belong to an organisation: its `readable(reader)` statement is
scoped to the reader's organisation, and to the reader's agent for rows that belong to one agent
when the reader is an agent. Every lookup by id for a principal goes through it, so forgetting the
organisation is not possible. Only the operator (the command line) and the system (background jobs)
read across organisations, and they say so (`unrestricted`).

Repositories read and write rows; they never decide, commit, or import a service.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from sqlalchemy import false
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, SQLModel, select
from sqlmodel.sql.expression import SelectOfScalar

M = TypeVar("M", bound=SQLModel)


class Reader(Protocol):
    """Who reads: `auth.principal.Principal` is one."""

    @property
    def org_id(self) -> str | None: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def unrestricted(self) -> bool: ...


class Repository(Generic[M]):
    model: type[M]

    def __init__(self, session: Session) -> None:
        self.session = session

    def statement(self) -> SelectOfScalar[M]:
        return select(self.model)

    def first(self, statement: SelectOfScalar[M]) -> M | None:
        return self.session.exec(statement.limit(1)).first()

    def all(self, statement: SelectOfScalar[M]) -> Sequence[M]:
        return self.session.exec(statement).all()

    def add(self, row: M, *, flush: bool = True) -> M:
        self.session.add(row)
        if flush:
            self.session.flush()
        return row

    def add_unique(self, row: M) -> bool:
        """Insert `row` in a savepoint; False, and nothing written, when a unique value is taken.

        The savepoint keeps a refused insert from spoiling the rest of the caller's transaction.
        """
        try:
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError:
            return False
        return True

    def refresh(self, row: M) -> M:
        self.session.refresh(row)
        return row

    def _column(self, name: str) -> ColumnElement[Any]:
        column: ColumnElement[Any] = getattr(self.model, name)
        return column


class TenantRepository(Repository[M]):
    """Rows of one organisation (`org_column`), and of one agent when `agent_column` is set."""

    org_column: ClassVar[str] = "org_id"
    agent_column: ClassVar[str | None] = None
    id_column: ClassVar[str] = "id"

    def readable(self, reader: Reader) -> SelectOfScalar[M]:
        statement = self.statement()
        if reader.unrestricted:
            return statement
        if reader.org_id is None:
            return statement.where(false())
        statement = statement.where(self._column(self.org_column) == reader.org_id)
        if reader.agent_id is not None and self.agent_column is not None:
            statement = statement.where(self._column(self.agent_column) == reader.agent_id)
        return statement

    def get_readable(self, reader: Reader, row_id: str) -> M | None:
        return self.first(self.readable(reader).where(self._column(self.id_column) == row_id))

    def lock_readable(self, reader: Reader, row_id: str) -> M | None:
        """The row, re-read from the database, for a transaction about to change it."""
        row = self.get_readable(reader, row_id)
        return None if row is None else self.refresh(row)
