"""Pytest plugin: how tests that need an outside tool skip, or fail under CI.

A test that needs PostgreSQL, anvil or Chromium calls `require(...)` with a reason that says how to
get the tool. Locally that skips; with `PAYWARDEN_REQUIRE_ALL_TESTS=1` (set by `.ci/run`) the same
call fails the test, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def all_tests_required() -> bool:
    return os.environ.get("PAYWARDEN_REQUIRE_ALL_TESTS") == "1"


def require(reason: str) -> NoReturn:
    """Skip (or, under PAYWARDEN_REQUIRE_ALL_TESTS=1, fail) because a tool is missing."""
    if all_tests_required():
        pytest.fail(f"required tool missing under PAYWARDEN_REQUIRE_ALL_TESTS=1: {reason}", pytrace=False)
    pytest.skip(reason)


def pytest_report_header(config: pytest.Config) -> str:
    mode = "every test must run" if all_tests_required() else "missing tools skip"
    return f"paywarden: {mode}"


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A skip under the strict mode is a hole in CI, whatever raised it: fail the run.
    if all_tests_required() and _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if all_tests_required() and _skipped:
        terminalreporter.write_line(
            f"PAYWARDEN_REQUIRE_ALL_TESTS=1: {len(_skipped)} test(s) skipped, failing the run", red=True
        )
