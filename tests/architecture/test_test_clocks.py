"""Frozen time in the tests comes from one place, so this run's epoch shift reaches all of it.

`tests/support/clocks.py` moves every frozen clock and written date by a whole number of 28-year
calendar cycles per run: a test that compares one with the wall clock fails on some run, whatever
today's date is. That only holds if no test builds a `FrozenClock` or a dated `datetime` of its
own, which this test checks over every test module; the shift itself is checked below.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

from tests.support import clocks

ROOT = Path(__file__).resolve().parents[2]
THE_ONE_PLACE = ROOT / "tests" / "support" / "clocks.py"


def _test_modules() -> list[Path]:
    tests = ROOT / "tests"
    skip = {tests / "support" / "node", tests / "bench"}
    return sorted(
        path
        for path in tests.rglob("*.py")
        if path != THE_ONE_PLACE and not any(part in path.parents for part in skip)
    )


def _frozen_time_written_by_hand(tree: ast.AST) -> list[int]:
    """Lines that build a FrozenClock, or a datetime from a literal year, outside clocks.py."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        literal_year = bool(node.args) and isinstance(node.args[0], ast.Constant)
        if name == "FrozenClock" or (name == "datetime" and literal_year):
            lines.append(node.lineno)
    return lines


def test_no_test_freezes_time_by_hand() -> None:
    offenders = {
        str(path.relative_to(ROOT)): lines
        for path in _test_modules()
        if (lines := _frozen_time_written_by_hand(ast.parse(path.read_text(), filename=str(path))))
    }
    assert offenders == {}, (
        "freeze time with tests.support.clocks (frozen_clock, written, chain_clock), "
        f"so the run's epoch shift moves it: {offenders}"
    )


def test_the_check_sees_a_clock_frozen_by_hand() -> None:
    by_hand = "clock = FrozenClock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))\n"
    assert _frozen_time_written_by_hand(ast.parse(by_hand)) == [1, 1]
    assert _frozen_time_written_by_hand(ast.parse("clock = frozen_clock(written(2026, 12, 1))\n")) == []


def test_a_shifted_date_keeps_its_calendar_and_leaves_the_wall_clock_far_behind() -> None:
    cycles = clocks.epoch_shift_cycles()
    assert cycles in clocks.SHIFT_CYCLES or cycles == 0
    wednesday = clocks.written(2026, 12, 2, 12, 0)
    assert (wednesday.month, wednesday.day, wednesday.hour) == (12, 2, 12)
    assert wednesday.weekday() == 2  # 2 December 2026 is a Wednesday, and so is every shift of it
    leap_day = clocks.written(2028, 2, 29)  # leap years fall on the same years of each cycle
    assert (leap_day.month, leap_day.day) == (2, 29)
    if cycles:
        assert abs(wednesday.year - 2026) >= clocks.CYCLE_YEARS
        assert abs(clocks.frozen_clock().now() - datetime.now(UTC)).days > 365 * 27
