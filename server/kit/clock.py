"""Time, in one place, so tests can move it and every timestamp is timezone-aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FrozenClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime) -> None:
        self._now = start

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)


def as_utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every one we stored was UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def next_utc_midnight(now: datetime) -> datetime:
    start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return start + timedelta(days=1)


def utc_day_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def isoformat(value: datetime) -> str:
    return as_utc(value).isoformat().replace("+00:00", "Z")
