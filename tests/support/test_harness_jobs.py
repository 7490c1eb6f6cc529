"""Test servers run no background jobs unless a test asks: a job on the wall clock racing what a
test just wrote would make that test depend on timing."""

from __future__ import annotations

from pathlib import Path

from tests.support.paywarden import settings_for
from tests.support.processes import server_environ


def test_in_process_and_command_line_test_servers_run_no_background_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'paywarden.db'}"
    assert settings_for(database_url=url, port=8402).background_jobs is False
    environ = server_environ(database_url=url, public_url="http://127.0.0.1:8402", extra={})
    assert environ["PAYWARDEN_BACKGROUND_JOBS"] == "0"
    asked = server_environ(
        database_url=url, public_url="http://127.0.0.1:8402", extra={"PAYWARDEN_BACKGROUND_JOBS": "1"}
    )
    assert asked["PAYWARDEN_BACKGROUND_JOBS"] == "1"
