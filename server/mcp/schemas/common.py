"""Small renderings shared by several tools' results."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from server.kit.clock import isoformat
from server.kit.money import format_usd


def usd(atomic: int) -> str:
    return format_usd(atomic, atomic=True)


def dollars(value: Decimal) -> str:
    return format_usd(value)


def usd_or_none(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


def timestamp(value: datetime) -> str:
    return isoformat(value)


def timestamp_or_none(value: datetime | None) -> str | None:
    return None if value is None else isoformat(value)
