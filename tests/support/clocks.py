"""A clock that runs with real time but can be moved ahead, for expiry tests against a server."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class ShiftedClock:
    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()  # moved by the test thread, read by the server's threads

    def now(self) -> datetime:
        with self._lock:
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += timedelta(seconds=seconds)
