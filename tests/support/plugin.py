"""Pytest plugin: how tests that need an outside tool skip, or fail under CI; where output goes.

A test that needs PostgreSQL, anvil or Chromium calls `require(...)` with a reason that says how to
get the tool. Locally that skips; with `PAYWARDEN_REQUIRE_ALL_TESTS=1` (set by `.ci/run`) the same
call fails the test, so CI can never pass by skipping.

Files a person should look at after a run (screenshots of pages) go to the test output folder,
`.pytest_cache/test-output` or `$PAYWARDEN_TEST_OUTPUT`; the report's header and summary name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from tests.support import clocks

_ROOT = Path(__file__).resolve().parents[2]


def all_tests_required() -> bool:
    return os.environ.get("PAYWARDEN_REQUIRE_ALL_TESTS") == "1"


def require(reason: str) -> NoReturn:
    """Skip (or, under PAYWARDEN_REQUIRE_ALL_TESTS=1, fail) because a tool is missing."""
    if all_tests_required():
        pytest.fail(f"required tool missing under PAYWARDEN_REQUIRE_ALL_TESTS=1: {reason}", pytrace=False)
    pytest.skip(reason)


def output_dir() -> Path:
    """Where tests keep files for people to look at; outside git (.gitignore has .pytest_cache)."""
    override = os.environ.get("PAYWARDEN_TEST_OUTPUT")
    return Path(override) if override else _ROOT / ".pytest_cache" / "test-output"


_kept: list[Path] = []


def record_test_output(path: Path) -> None:
    """Note a file kept for people, so the end of the report lists it."""
    _kept.append(path)


@pytest.hookimpl(trylast=True)  # after pytest-randomly has chosen its seed
def pytest_configure(config: pytest.Config) -> None:
    seed = getattr(config.option, "randomly_seed", None)
    clocks.choose_epoch_shift(seed if isinstance(seed, int) else None)


def pytest_report_header(config: pytest.Config) -> list[str]:
    mode = "every test must run" if all_tests_required() else "missing tools skip"
    years = clocks.CYCLE_YEARS * clocks.epoch_shift_cycles()
    return [
        f"paywarden: {mode}",
        f"paywarden: test output (screenshots) in {output_dir()}",
        f"paywarden: frozen clocks run {years:+d} years from their written dates "
        f"({clocks.ENV}={clocks.epoch_shift_cycles()} replays it)",
    ]


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A skip under the strict mode is a hole in CI, whatever raised it: fail the run.
    if all_tests_required() and _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _kept:
        terminalreporter.write_sep("-", f"{len(_kept)} file(s) kept in {output_dir()}")
        for path in _kept:
            terminalreporter.write_line(str(path))
    if all_tests_required() and _skipped:
        terminalreporter.write_line(
            f"PAYWARDEN_REQUIRE_ALL_TESTS=1: {len(_skipped)} test(s) skipped, failing the run", red=True
        )
