"""The official MCP conformance suite passes against a real `paywarden serve` process.

Every server scenario that applies to a server without the suite's own fixture tools runs, with an
agent token added to the suite's requests (tests/support/conformance.py says how). A failure names
each failing check, with the suite's own words and details.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.conformance import (
    SERVER_SCENARIOS,
    SUITE_MISSING,
    report,
    run_server_scenario,
    suite_installed,
)
from tests.support.databases import migrated_database
from tests.support.paywarden import settings_for
from tests.support.plugin import require
from tests.support.processes import ServeProcess, serve_processes
from tests.support.tenants import make_agent


class Served(NamedTuple):
    server: ServeProcess
    token: str


@pytest.fixture(scope="module", name="served")
def fixture_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One `paywarden serve` on SQLite for the module, and an agent token for it."""
    if not suite_installed():
        require(SUITE_MISSING)
    workdir = tmp_path_factory.mktemp("conformance")
    with (
        migrated_database("sqlite", workdir) as db,
        serve_processes(1, database_url=db.url, extra={}, workdir=workdir) as (public_url, servers),
    ):
        port = int(public_url.rsplit(":", 1)[1])
        setup = make_agent(db, settings_for(database_url=db.url, port=port), allow_hosts=[])
        yield Served(servers[0], setup.token)


def test_the_server_scenarios_of_the_mcp_conformance_suite_pass(served: Served, tmp_path: Path) -> None:
    runs = [
        run_server_scenario(served.server.mcp_url, scenario, token=served.token, output_dir=tmp_path)
        for scenario in SERVER_SCENARIOS
    ]

    # Every scenario runs for real: a client that initializes gets a session, so the
    # multiple-streams scenario has one to test.
    ok, text = report(runs, {})
    print(text)  # every scenario's tally, shown with -rA
    assert ok, f"{text}\n--- paywarden serve output ---\n{served.server.output()[-4000:]}"


def test_with_a_wrong_token_the_suite_is_turned_away(served: Served, tmp_path: Path) -> None:
    """The injected token is what lets the suite in: with a wrong one, every request gets a 401."""
    logged_before = len(served.server.output())
    run = run_server_scenario(
        served.server.mcp_url, "server-initialize", token="pw_at_not-a-token", output_dir=tmp_path
    )
    server_log = served.server.output()[logged_before:]

    assert [check.status for check in run.checks] == ["FAILURE"], run.output
    assert "invalid_token" in (run.checks[0].message or ""), run.checks[0].describe()
    assert run.exit_code != 0
    assert '"POST /mcp HTTP/1.1" 401' in server_log
    assert '"POST /mcp HTTP/1.1" 200' not in server_log
