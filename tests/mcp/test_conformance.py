"""The official MCP conformance suite passes against a real `paywarden serve` process.

Every server scenario that applies to a server without the suite's own fixture tools runs, with an
agent token added to the suite's requests (tests/support/conformance.py says how). A failure names
each failing check, with the suite's own words and details.
"""

from __future__ import annotations

from pathlib import Path

from server.kit.db import Database
from tests.support.conformance import (
    SERVER_SCENARIOS,
    SUITE_MISSING,
    VACUOUS_WITHOUT_SESSIONS,
    report,
    run_server_scenario,
    suite_installed,
)
from tests.support.paywarden import settings_for
from tests.support.plugin import require
from tests.support.processes import serve_processes
from tests.support.tenants import make_agent


def test_the_server_scenarios_of_the_mcp_conformance_suite_pass(sqlite_db: Database, tmp_path: Path) -> None:
    if not suite_installed():
        require(SUITE_MISSING)
    with serve_processes(1, database_url=sqlite_db.url, extra={}, workdir=tmp_path) as (public_url, servers):
        port = int(public_url.rsplit(":", 1)[1])
        setup = make_agent(sqlite_db, settings_for(database_url=sqlite_db.url, port=port), allow_hosts=[])
        runs = [
            run_server_scenario(
                servers[0].mcp_url, scenario, token=setup.token, output_dir=tmp_path / "results"
            )
            for scenario in SERVER_SCENARIOS
        ]
        server_output = servers[0].output()

    # The endpoint is stateless (README, Decisions): no Mcp-Session-Id, so the multiple-streams
    # scenario has nothing to run on. report() fails once it does run, so the exception cannot linger.
    ok, text = report(runs, VACUOUS_WITHOUT_SESSIONS)
    print(text)  # every scenario's tally, shown with -rA
    assert ok, f"{text}\n--- paywarden serve output ---\n{server_output[-4000:]}"


def test_with_a_wrong_token_the_suite_is_turned_away(sqlite_db: Database, tmp_path: Path) -> None:
    """The injected token is what lets the suite in: with a wrong one, every request gets a 401."""
    if not suite_installed():
        require(SUITE_MISSING)
    with serve_processes(1, database_url=sqlite_db.url, extra={}, workdir=tmp_path) as (_url, servers):
        run = run_server_scenario(
            servers[0].mcp_url,
            "server-initialize",
            token="pw_at_not-a-token",
            output_dir=tmp_path / "results",
        )
        server_output = servers[0].output()
    assert [check.status for check in run.checks] == ["FAILURE"], run.output
    assert "invalid_token" in (run.checks[0].message or ""), run.checks[0].describe()
    assert run.exit_code != 0
    assert '"POST /mcp HTTP/1.1" 401' in server_output
    assert '"POST /mcp HTTP/1.1" 200' not in server_output
