"""Shared metadata with a naming convention, so migrations name constraints the same everywhere."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import DateTime, String, TypeDecorator
from sqlalchemy.engine import Dialect
from sqlmodel import SQLModel

from server.kit.clock import as_utc

metadata = SQLModel.metadata
metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC on the way out, whatever the database kept (SQLite keeps naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored")
        return as_utc(value) if dialect.name == "postgresql" else as_utc(value).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


class EnumColumn(TypeDecorator[StrEnum]):
    """A `StrEnum` stored as VARCHAR(length): unknown values are refused before they reach a row."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[StrEnum], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return str(self.enum(value))

    def process_result_value(self, value: Any, dialect: Dialect) -> StrEnum | None:
        return None if value is None else self.enum(value)
