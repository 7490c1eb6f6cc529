"""The clocks tests give servers and services, and the one rule they keep: a test may use a frozen
clock or the real one, but never compare one with the other.

To keep that rule checked, every frozen time in the suite is moved by this run's *epoch shift*: a
whole number of 28-year calendar cycles, backwards or forwards, chosen per run. Within 1901-2099
the Gregorian calendar repeats every 28 years, so a shifted date keeps its weekday, its month's
length and its leap day, and a test of weeks, months or midnights means the same thing; but a
frozen time compared with the wall clock (directly, or by a browser's cookie jar, a chain's block
time, a database's `now()`) is decades off and fails at once, whatever today's date is.

The shift comes from `PAYWARDEN_TEST_EPOCH_SHIFT` (cycles: -1, 1 or 2; 0 turns it off) or else
from pytest-randomly's seed, so `--randomly-seed=N` replays it; the report's header names it.
Frozen clocks come only from this module (`frozen_clock`, `written`): a test in
`tests/architecture` refuses a `FrozenClock(...)` or a literal date written anywhere else.
"""

from __future__ import annotations

import os
import random
import threading
from datetime import UTC, datetime, timedelta

from server.kit.clock import FrozenClock, SystemClock

CYCLE_YEARS = 28
SHIFT_CYCLES = (-1, 1, 2)  # 1998, 2054 or 2082 for a date written in 2026
ENV = "PAYWARDEN_TEST_EPOCH_SHIFT"

_cycles: int | None = None


def choose_epoch_shift(seed: int | None) -> int:
    """Fix this run's shift (in cycles) from the environment or the run's seed; returns it."""
    global _cycles
    override = os.environ.get(ENV)
    # Not a secret: the same seed gives the same shift, so a run can be replayed.
    _cycles = int(override) if override is not None else random.Random(seed).choice(SHIFT_CYCLES)
    return _cycles


def epoch_shift_cycles() -> int:
    if _cycles is None:
        return choose_epoch_shift(None)
    return _cycles


def shifted(moment: datetime) -> datetime:
    """`moment` moved by this run's shift: same month, day, weekday and time of day."""
    utc = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return utc.replace(year=utc.year + CYCLE_YEARS * epoch_shift_cycles())


def written(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    """A date a test writes down as a constant, moved by this run's shift."""
    return shifted(datetime(year, month, day, hour, minute, second, tzinfo=UTC))


def frozen_clock(start: datetime | None = None) -> FrozenClock:
    """A clock that moves only when the test says so: at `start` (already shifted, from `written`
    or another frozen clock), or at today's date moved by the shift when none is given."""
    return FrozenClock(start if start is not None else shifted(SystemClock().now()))


def chain_clock(block_time: int | float | datetime) -> FrozenClock:
    """A frozen clock at a time read off a chain (a block's timestamp): there the chain is the one
    clock both sides read, so it is never shifted."""
    start = block_time if isinstance(block_time, datetime) else datetime.fromtimestamp(block_time, UTC)
    return FrozenClock(start)


class ShiftedClock:
    """A clock that runs with real time but can be moved ahead, for expiry tests against a server
    whose other parties (a browser, the chain) keep real time too."""

    def __init__(self) -> None:
        self._offset = timedelta(0)
        self._lock = threading.Lock()  # moved by the test thread, read by the server's threads

    def now(self) -> datetime:
        with self._lock:
            return datetime.now(UTC) + self._offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += timedelta(seconds=seconds)
