"""Fixtures of the benchmarks: their settings and the one table every benchmark adds rows to.

At the end of the run the table is printed and written to `.pytest_cache/bench/results.md`.
"""

from __future__ import annotations

import pytest

from tests.bench.harness import RESULTS_JSON, BenchSettings, BenchTable

TABLE = BenchTable()
# The order the benchmarks run and report in: the order of the Performance section.
MODULES = (
    "test_floor",
    "test_fetch_paid_latency",
    "test_pay_x402_latency",
    "test_call_anatomy",
    "test_decisions",
    "test_cap_race",
    "test_large_ledger",
    "test_sessions",
    "test_read_drivers",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def position(item: pytest.Item) -> int:
        module = getattr(item, "module", None)
        name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
        return MODULES.index(name) if name in MODULES else len(MODULES)

    items.sort(key=position)


@pytest.fixture(scope="session")
def bench() -> BenchSettings:
    return BenchSettings()


@pytest.fixture(scope="session")
def table() -> BenchTable:
    return TABLE


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TABLE.rows:
        return
    path = TABLE.write()
    terminalreporter.section("Paywarden benchmarks")
    terminalreporter.write_line(path.read_text(encoding="utf-8"))
    terminalreporter.write_line(f"written to {path} (raw numbers: {RESULTS_JSON})")
    terminalreporter.write_line("`make bench-readme` copies the table into docs/performance.md")
