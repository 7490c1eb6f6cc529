"""Spending windows, all in UTC: the calendar day, the week from Monday to Sunday, the calendar
month. A window's spend starts again from 0 at its end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from server.vocabulary import RuleWindow as Window

WINDOWS: tuple[Window, ...] = tuple(Window)


def window_start(window: Window, now: datetime) -> datetime:
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if window == Window.DAY:
        return day
    if window == Window.WEEK:
        return day - timedelta(days=day.weekday())  # Monday is weekday 0
    return day.replace(day=1)


def window_end(window: Window, now: datetime) -> datetime:
    """When the window that contains `now` resets: the next midnight, Monday or first of a month."""
    start = window_start(window, now)
    if window == Window.DAY:
        return start + timedelta(days=1)
    if window == Window.WEEK:
        return start + timedelta(days=7)
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)
